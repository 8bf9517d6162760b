# Prepares a development checkout on Windows: a virtualenv in .venv with cnki-mcp installed in editable mode.
#   powershell -ExecutionPolicy Bypass -File scripts\bootstrap.ps1
#   then: .venv\Scripts\cnki-mcp setup
# The Python: $env:PYTHON if set, else the py launcher's 3.13, 3.12 or 3.11, else python/python3 on PATH
# when it is 3.11 or newer, else one uv already has. A .venv made by an older Python is rebuilt.
# Messages are Chinese, English with CNKI_LANG=en (or, CNKI_LANG unset, an English LC_ALL/LC_MESSAGES/LANG: the
# CLI's rule). What pip prints goes to .venv\bootstrap-pip.log, shown only when it fails.
$ErrorActionPreference = 'Stop'
Set-Location (Split-Path -Parent $PSScriptRoot)

function Test-English {
    $chosen = "$env:CNKI_LANG".Trim()
    if ($chosen) { return $chosen.ToLower().StartsWith('en') }
    foreach ($value in @($env:LC_ALL, $env:LC_MESSAGES, $env:LANG)) {
        $value = "$value".Trim()
        if ($value) { return $value.ToLower().StartsWith('en') }
    }
    return $false
}
$English = Test-English

# The Chinese line, or the English one.
function Say([string]$Zh, [string]$En) {
    if ($English) { return $En }
    return $Zh
}

function Get-PythonVersion([string[]]$Command) {
    try {
        $exe = $Command[0]
        $rest = @($Command | Select-Object -Skip 1)
        $out = & $exe @rest -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>$null
        if ($LASTEXITCODE -eq 0 -and "$out" -match '(\d+)\.(\d+)') { return [version]"$($Matches[1]).$($Matches[2])" }
    } catch { }
    return $null
}

function Test-GoodVersion($Version) {
    return ($null -ne $Version) -and ($Version -ge [version]'3.11')
}

function Stop-NoPython([string]$Found) {
    if ($English) {
        $seen = if ($Found) { " (found $Found)" } else { '' }
        Write-Host "error: cnki-mcp needs Python 3.11 or newer$seen." -ForegroundColor Red
        Write-Host 'Install one, then run scripts\bootstrap.ps1 again:'
        Write-Host '  - installers: https://www.python.org/downloads/ (tick Add python.exe to PATH)'
        Write-Host '  - winget install Python.Python.3.12'
        Write-Host '  - with uv: uv python install 3.12'
        exit 1
    }
    $seen = if ($Found) { "（找到的是 $Found）" } else { '' }
    Write-Host "错误：cnki-mcp 需要 Python 3.11 或更新版本$seen。" -ForegroundColor Red
    Write-Host '请先安装一个，再重新运行 scripts\bootstrap.ps1：'
    Write-Host '  - 官方安装包：https://www.python.org/downloads/ （安装时勾选 Add python.exe to PATH）'
    Write-Host '  - winget install Python.Python.3.12'
    Write-Host '  - 用 uv：uv python install 3.12'
    exit 1
}

$python = $null
$found = ''
if ($env:PYTHON) {
    $version = Get-PythonVersion @($env:PYTHON)
    if (-not (Test-GoodVersion $version)) { Stop-NoPython "$env:PYTHON $version" }
    $python = @($env:PYTHON)
}
if (-not $python -and (Get-Command py -ErrorAction SilentlyContinue)) {
    foreach ($wanted in '-3.13', '-3.12', '-3.11') {
        if (Test-GoodVersion (Get-PythonVersion @('py', $wanted))) { $python = @('py', $wanted); break }
    }
}
if (-not $python) {
    foreach ($name in 'python', 'python3') {
        if (-not (Get-Command $name -ErrorAction SilentlyContinue)) { continue }
        $version = Get-PythonVersion @($name)
        if (Test-GoodVersion $version) { $python = @($name); break }
        if (-not $found -and $version) { $found = "$name $version" }
    }
}
if (-not $python -and (Get-Command uv -ErrorAction SilentlyContinue)) {
    $candidate = (& uv python find '>=3.11' 2>$null)
    if ($LASTEXITCODE -eq 0 -and $candidate) { $python = @("$candidate".Trim()) }
}
if (-not $python) { Stop-NoPython $found }
Write-Host (Say "使用 Python：$($python -join ' ')" "Using Python: $($python -join ' ')")

$venvPython = Join-Path '.venv' 'Scripts\python.exe'
if (Test-Path '.venv') {
    $venvVersion = if (Test-Path $venvPython) { Get-PythonVersion @($venvPython) } else { $null }
    if (-not (Test-GoodVersion $venvVersion)) {
        Write-Host (Say "已有的 .venv 是用 Python $venvVersion 建立的（或已无法运行），低于 3.11：删除后重建。" `
            "The existing .venv was made by Python $venvVersion (or no longer runs), older than 3.11: rebuilding it.")
        Remove-Item -Recurse -Force '.venv'
    }
}
if (-not (Test-Path $venvPython)) {
    $exe = $python[0]
    $rest = @($python | Select-Object -Skip 1)
    & $exe @rest -m venv .venv
    if ($LASTEXITCODE -ne 0) { Write-Host (Say '错误：无法建立虚拟环境 .venv。' 'error: the virtualenv .venv could not be made.') -ForegroundColor Red; exit 1 }
}
# pip and setuptools print notices in English: they go to the log, shown when an install fails.
$pipLog = Join-Path '.venv' 'bootstrap-pip.log'
Set-Content -Path $pipLog -Value $null
Write-Host (Say "正在安装 cnki-mcp 及其依赖（pip 的输出写入 $pipLog）……" "Installing cnki-mcp and its dependencies (pip's output goes to $pipLog)...")
$env:PIP_DISABLE_PIP_VERSION_CHECK = '1'
$ErrorActionPreference = 'Continue'  # Windows PowerShell 5.1 turns a redirected native stderr line into a stopping error
& $venvPython -m pip install -q --upgrade pip *>> $pipLog
$pipExit = $LASTEXITCODE
if ($pipExit -eq 0) {
    & $venvPython -m pip install -q -e . *>> $pipLog
    $pipExit = $LASTEXITCODE
}
$ErrorActionPreference = 'Stop'
if ($pipExit -ne 0) {
    Get-Content $pipLog | ForEach-Object { Write-Host $_ }
    Write-Host (Say "错误：pip install 失败；上面是它的输出（也在 $pipLog 中）。" "error: pip install failed; its output is above (and in $pipLog).") -ForegroundColor Red
    exit $pipExit
}
Write-Host (Say '完成。下一步：.venv\Scripts\cnki-mcp setup' 'Done. Next: .venv\Scripts\cnki-mcp setup')

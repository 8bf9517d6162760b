@echo off
rem cnki-mcp setup for Windows: double-click it. Arguments go to "cnki-mcp.exe setup" unchanged.
rem The body after chcp is read as UTF-8, so it may hold Chinese text.
setlocal
chcp 65001 >nul
cd /d "%~dp0"
if not exist "%~dp0cnki-mcp.exe" (
  echo 在此文件夹中没有找到 cnki-mcp.exe；请先完整解压下载的压缩包，再运行本脚本。
  set "status=1"
  goto done
)
"%~dp0cnki-mcp.exe" setup %*
set "status=%ERRORLEVEL%"
:done
rem With arguments it is a scripted run: no pause.
if not "%~1"=="" exit /b %status%
echo.
if "%status%"=="0" (echo 设置完成。) else (echo 设置没有完成（退出码 %status%），请查看上面的提示。)
pause
exit /b %status%

"""`cnki-mcp doctor`: the local checks, one ✓/⚠/✗ line each in Chinese, then a verdict.

⚠ is something that works today but will hurt a newcomer (setup never run, no client configured, a
configured browser that is gone, an environment value that is ignored, no screen for login and
captchas): it says what to do, and the verdict is no longer 一切正常, though the exit code stays 0.

Nothing is started and nothing is locked (the browser is not launched, CNKI is not visited); with
``--protocol`` a second copy of the server is started for a real MCP round trip. A config.json that
cannot be read is a failed check naming the file, not a crash: the other checks still run, with the
default settings. ``--json`` prints the same report for machines: the ``diagnostics`` tool's fields,
``browser_executable``, ``clients``, ``protocol`` (when asked), ``checks`` and ``verdict``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cnki_mcp import __version__
from cnki_mcp.core import logs, settings
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config


class Check(msgspec.Struct):
    name: str
    ok: bool
    message: str
    warning: bool = False  # ok, but with something to do


async def run_checks(protocol: bool) -> tuple[dict[str, Any], list[Check]]:
    """The report and its checks, in the order they are printed."""
    from cnki_mcp.app import App
    from cnki_mcp.setup.clients import configured_clients, server_command
    from cnki_mcp.store.library import load_config

    root = settings.data_root()
    report: dict[str, Any] = {"version": __version__, "data_dir": str(root)}
    checks: list[Check] = []
    try:
        config = load_config(root)
    except CnkiError as error:
        config = Config()  # the other checks still run, with the defaults
        checks.append(Check("config", False, f"config.json 有问题：{error.message}"))
    else:
        checks.append(_config_check(root))
    try:
        diagnostics = msgspec.to_builtins(await App(root).diagnostics(None, None))
    except CnkiError as error:
        checks.append(Check("diagnostics", False, f"本地诊断失败：{error.message}"))
    else:
        diagnostics.pop("config_error", None)  # the config check above says it, with the file's name
        report.update(diagnostics)
    checks.append(_route_check(config))
    report["browser_executable"] = browser = _browser_report(config)
    checks.append(_browser_check(browser, config))
    checks.append(_display_check())
    report["clients"] = configured = configured_clients(root)
    checks.extend(_client_checks(configured))
    checks.append(_log_check(root))
    checks.extend(_settings_checks())
    if protocol:
        from cnki_mcp.surface.server import protocol_probe

        try:
            report["protocol"] = result = await protocol_probe(server_command())
        except CnkiError as error:
            report["protocol"] = {"passed": False, "code": error.code, "message": error.message}
            checks.append(Check("protocol", False, f"MCP 通信检查未通过：{error.message}"))
        else:
            checks.append(Check("protocol", True, f"MCP 通信正常：{result.get('tools')} 个工具，版本 {result.get('version')}"))
    problems = sum(not check.ok for check in checks)
    warnings = sum(check.ok and check.warning for check in checks)
    report["checks"] = msgspec.to_builtins(checks)
    report["verdict"] = {
        "ok": problems == 0, "problems": problems, "warnings": warnings, "message": verdict(problems, warnings)
    }
    return report, checks


def _config_check(root: Any) -> Check:
    path = root / "config.json"
    if path.is_file():
        return Check("config", True, f"config.json 可以读取：{path}")
    return Check("config", True, f"这个数据目录还没有设置过（没有 {path}）：请运行 cnki-mcp setup，"
                 "它会选择并检查浏览器、接入客户端。", warning=True)


def _route_check(config: Config) -> Check:
    from cnki_mcp.site.remote import route_words

    if config.route.kind == "direct":
        return Check("route", True, "访问方式：直接访问知网")
    return Check("route", True, f"访问方式：{route_words(config.route)}；学校 VPN 会话是否有效，用 doctor --site 检查")


def _browser_report(config: Config) -> dict[str, Any]:
    import logging

    from cnki_mcp.site import discovery

    # The browser check below says a missing configured browser in Chinese; discovery's English
    # warning would only repeat it on stderr.
    quiet = logging.getLogger(discovery.__name__)
    was, quiet.disabled = quiet.disabled, True
    try:
        return discovery.browser_report(config)
    finally:
        quiet.disabled = was


def _browser_check(browser: dict[str, Any], config: Config) -> Check:
    from pathlib import Path

    if not browser.get("found"):
        return Check("browser", False, f"浏览器：{browser.get('message')}")
    configured = config.browser_path.strip()
    if configured and browser.get("source") == "detected" and not Path(configured).is_file():
        return Check("browser", True, f"浏览器：config.json 里的 {configured} 已不存在，现在改用自动找到的 "
                     f"{browser.get('path')}；运行 cnki-mcp setup --browser <浏览器路径> 重新选择。", warning=True)
    source = {"CNKI_BROWSER_PATH": "来自 CNKI_BROWSER_PATH", "config.json": "来自 config.json"}.get(
        browser.get("source", ""), "自动找到"
    )
    return Check("browser", True, f"浏览器：{browser.get('path')}（{source}）")


def _display_check() -> Check:
    from cnki_mcp.core.display import display_problem
    from cnki_mcp.site.chrome import env_headless

    problem = display_problem()
    if problem is None:
        return Check("display", True, "有图形界面：登录和验证码的浏览器窗口可以显示")
    if env_headless():
        return Check("display", True, "没有图形界面，CNKI_HEADLESS=1：浏览器以无界面方式运行，可以检索和读取，"
                     "但遇到登录或验证码时无法处理", warning=True)
    return Check("display", True, problem, warning=True)


def _settings_checks() -> list[Check]:
    return [
        Check("settings", True, f"环境变量 {name}={value!r} 不是正整数，已改用默认值 {default}；请在客户端配置的 env 中改正或删除它。",
              warning=True)
        for name, value, default in settings.ignored_settings()
    ]


def _client_checks(configured: list[dict[str, Any]]) -> list[Check]:
    if not configured:
        return [Check("clients", True, "还没有客户端接入：没有发现写有 cnki 的客户端配置文件。运行 cnki-mcp setup --client "
                      "<客户端> --install-client 接入（手动粘贴或导入链接接入的客户端无法在这里检查）。", warning=True)]
    checks = []
    for item in configured:
        where = f"（{item['path']}）"
        if item["status"] == "current":
            checks.append(Check("clients", True, f"{item['name']} 已接入本程序{where}"))
        else:
            checks.append(Check("clients", False, f"{item['name']}：{item.get('message', '')}{where}"))
    return checks


def _log_check(root: Any) -> Check:
    level, warning = logs.level_setting()
    if warning:
        return Check("log", False, warning)
    return Check("log", True, f"日志级别 {level}，服务的日志写到标准错误输出和 {logs.log_file(root)}")


def verdict(problems: int, warnings: int = 0) -> str:
    if problems == 0 and warnings == 0:
        return "结论：一切正常。"
    if problems == 0:
        return f"结论：可以运行，但有 {warnings} 处需要注意，请按上面标 ⚠ 的提示处理。"
    tail = f"，另有 {warnings} 处需要注意（⚠）" if warnings else ""
    return f"结论：发现 {problems} 个问题，请按上面标 ✗ 的提示处理{tail}。"


def render(report: dict[str, Any], checks: list[Check]) -> str:
    """The human report: a heading, one line per check, the verdict."""
    lines = [f"cnki-mcp {report['version']} 本地检查（数据目录：{report['data_dir']}）"]
    lines.extend(("✗ " if not check.ok else "⚠ " if check.warning else "✓ ") + check.message for check in checks)
    lines.append(report["verdict"]["message"])
    return "\n".join(lines)

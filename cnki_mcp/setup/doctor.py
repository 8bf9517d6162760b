"""`cnki-mcp doctor`: the local checks, one ✓/⚠/✗ line each in the CLI's language (setup/messages.py), then a verdict.

⚠ is something that works today but will hurt a newcomer (setup never run, no client configured, a
configured browser that is gone, an environment value that is ignored, no screen for login and
captchas, read for each connected client from the env of its entry): it says what to do, and the
verdict is no longer 一切正常, though the exit code stays 0.

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
from cnki_mcp.setup.cli_words import said
from cnki_mcp.setup.messages import english, msg


class Check(msgspec.Struct):
    name: str
    ok: bool
    message: str
    warning: bool = False  # ok, but with something to do


async def run_checks(protocol: bool) -> tuple[dict[str, Any], list[Check]]:
    """The report and its checks, in the order they are printed."""
    from cnki_mcp.app import App
    from cnki_mcp.app.core import load_checked_config
    from cnki_mcp.setup.clients import configured_clients
    from cnki_mcp.setup.launcher import server_command
    from cnki_mcp.tools import diagnostics as diagnostics_tool

    root = settings.data_root()
    report: dict[str, Any] = {"version": __version__, "data_dir": str(root)}
    checks: list[Check] = []
    refused: CnkiError | None = None
    try:
        config, refused = load_checked_config(root)
    except CnkiError as error:
        config = Config()  # the other checks still run, with the defaults
        checks.append(Check("config", False, msg("doctor.config_bad", message=said(error))))
    else:
        checks.append(_config_check(root))
    try:
        diagnostics = msgspec.to_builtins(await diagnostics_tool.run(App(root), diagnostics_tool.Args(), None))
    except CnkiError as error:
        checks.append(Check("diagnostics", False, msg("doctor.diagnostics_failed", message=said(error))))
    else:
        diagnostics.pop("config_error", None)  # the config check above says it, with the file's name
        report.update(diagnostics)
    checks.append(_route_check(config, refused))
    report["browser_executable"] = browser = _browser_report(config)
    checks.append(_browser_check(browser, config))
    report["clients"] = configured = configured_clients(root)
    checks.extend(_display_checks(configured))
    checks.extend(_client_checks(configured))
    checks.append(_log_check(root))
    checks.extend(_settings_checks())
    if protocol:
        from cnki_mcp.surface.server import protocol_probe

        try:
            report["protocol"] = result = await protocol_probe(server_command())
        except CnkiError as error:
            report["protocol"] = {"passed": False, "code": error.code, "message": error.message}
            checks.append(Check("protocol", False, msg("doctor.protocol_failed", message=said(error))))
        else:
            checks.append(Check("protocol", True, msg("doctor.protocol_ok", tools=result.get("tools"), version=result.get("version"))))
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
        return Check("config", True, msg("doctor.config_ok", path=path))
    return Check("config", True, msg("doctor.never_set_up", path=path), warning=True)


def _route_check(config: Config, refused: CnkiError | None = None) -> Check:
    """How CNKI is reached: the route, and (when not left to CNKI) the site config.json fixes; a stored route the
    gateway rules refused is a warning saying what to do."""
    from cnki_mcp.site.remote import route_words, setting_words

    words = route_words(config.route, english=english())
    line = msg("doctor.route_direct" if config.route.kind == "direct" else "doctor.route_gateway", route=words)
    if config.site != "auto":
        line += msg("doctor.site", site=setting_words(config.site, english=english()))
    if refused is not None:
        line += msg("doctor.route_refused", code=refused.code, message=refused.message)
    return Check("route", True, line, warning=refused is not None)


def _browser_report(config: Config) -> dict[str, Any]:
    import logging

    from cnki_mcp.site import discovery

    # The browser check below says a missing configured browser in its own words; discovery's
    # English log warning would only repeat it on stderr.
    quiet = logging.getLogger(discovery.__name__)
    was, quiet.disabled = quiet.disabled, True
    try:
        return discovery.browser_report(config)
    finally:
        quiet.disabled = was


def _browser_check(browser: dict[str, Any], config: Config) -> Check:
    from pathlib import Path

    if not browser.get("found"):
        # discovery's message is the tools' Chinese; this line says the same in the CLI's language.
        gone = msg("doctor.browser_gone_from", source=browser["missing_from"], path=browser["missing_path"]) \
            if browser.get("missing_path") else ""
        return Check("browser", False, msg("doctor.browser_missing", gone=gone))
    configured = config.browser_path.strip()
    if configured and browser.get("source") == "detected" and not Path(configured).is_file():
        return Check("browser", True, msg("doctor.browser_gone", configured=configured, path=browser.get("path")),
                     warning=True)
    source = {"CNKI_BROWSER_PATH": "doctor.source_env", "config.json": "doctor.source_config"}.get(
        browser.get("source", ""), "doctor.source_detected"
    )
    return Check("browser", True, msg("doctor.browser", path=browser.get("path"), source=msg(source)))


def _display_checks(configured: list[dict[str, Any]]) -> list[Check]:
    """Whether the browser can show a window; without a screen, per connected client whether the env of its
    entry sets CNKI_HEADLESS (the client starts the server with that env, not with doctor's)."""
    from cnki_mcp.core.display import display_problem
    from cnki_mcp.site.chrome import env_headless

    problem = display_problem(english=english())
    if problem is None:
        return [Check("display", True, msg("doctor.screen"))]
    if env_headless():
        return [Check("display", True, msg("doctor.headless"), warning=True)]
    connected = [item for item in configured if item["status"] == "current"]
    if not connected:
        return [Check("display", True, problem, warning=True)]
    return [
        Check("display", True, msg("doctor.client_headless", client=item["name"], path=item["path"]))
        if item["headless"] else
        Check("display", True, msg("doctor.client_not_headless", client=item["name"], path=item["path"],
                                   id=item["client"]), warning=True)
        for item in connected
    ]


def _settings_checks() -> list[Check]:
    return [
        Check("settings", True, msg("doctor.ignored_setting", name=name, value=repr(value), default=default), warning=True)
        for name, value, default in settings.ignored_settings()
    ]


def _client_checks(configured: list[dict[str, Any]]) -> list[Check]:
    if not configured:
        return [Check("clients", True, msg("doctor.no_client"), warning=True)]
    checks = []
    for item in configured:
        if item["status"] == "current":
            checks.append(Check("clients", True, msg("doctor.client_current", client=item["name"], path=item["path"])))
        else:
            checks.append(Check("clients", False, msg(
                "doctor.client_problem", client=item["name"], message=item.get("message", ""), path=item["path"]
            )))
    return checks


def _log_check(root: Any) -> Check:
    level, warning = logs.level_setting(english=english())
    if warning:
        return Check("log", False, warning)
    return Check("log", True, msg("doctor.log", level=level, path=logs.log_file(root)))


def verdict(problems: int, warnings: int = 0) -> str:
    if problems == 0 and warnings == 0:
        return msg("doctor.all_well")
    if problems == 0:
        return msg("doctor.warnings_only", warnings=warnings)
    tail = msg("doctor.problems_tail", warnings=warnings) if warnings else ""
    return msg("doctor.problems", problems=problems, tail=tail)


def render(report: dict[str, Any], checks: list[Check]) -> str:
    """The human report: a heading, one line per check, the verdict."""
    lines = [msg("doctor.heading", version=report["version"], data_dir=report["data_dir"])]
    lines.extend(("✗ " if not check.ok else "⚠ " if check.warning else "✓ ") + check.message for check in checks)
    lines.append(report["verdict"]["message"])
    return "\n".join(lines)

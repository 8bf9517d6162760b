"""The error catalogue: every code the package raises is declared, with a Chinese message."""

from __future__ import annotations

import re
from pathlib import Path

from cnki_mcp.core.errors import CATALOGUE

PACKAGE = Path(__file__).resolve().parents[1] / "cnki_mcp"
RAISED = re.compile(r"""CnkiError\(\s*["']([A-Z_]+)["']""")
HAN = re.compile(r"[\u4e00-\u9fff]")


def raised_codes() -> dict[str, str]:
    """Every code written as the first argument of ``CnkiError(...)`` in the package, with its file."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for code in RAISED.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, path.name)
    return found


def test_every_raised_code_is_declared() -> None:
    undeclared = {code: where for code, where in raised_codes().items() if code not in CATALOGUE}
    assert undeclared == {}


def test_every_declared_code_has_a_chinese_message() -> None:
    assert [code for code, entry in CATALOGUE.items() if not HAN.search(entry.message)] == []


def test_net_errors_that_never_reached_the_host_are_network_failures() -> None:
    from cnki_mcp.core.errors import net_failure, network_unreachable, unreachable_kind

    kinds = {
        error: unreachable_kind(error)
        for error in (
            "net::ERR_NAME_NOT_RESOLVED", "net::ERR_PROXY_CONNECTION_FAILED", "net::ERR_TUNNEL_CONNECTION_FAILED",
            "net::ERR_INTERNET_DISCONNECTED", "net::ERR_CONNECTION_REFUSED", "net::ERR_EMPTY_RESPONSE",
            "net::ERR_ABORTED", "net::ERR_FAILED", "net::ERR_CONTENT_LENGTH_MISMATCH", "",
        )
    }
    assert kinds == {
        "net::ERR_NAME_NOT_RESOLVED": "dns", "net::ERR_PROXY_CONNECTION_FAILED": "proxy",
        "net::ERR_TUNNEL_CONNECTION_FAILED": "proxy", "net::ERR_INTERNET_DISCONNECTED": "offline",
        "net::ERR_CONNECTION_REFUSED": "connection", "net::ERR_EMPTY_RESPONSE": "connection",
        "net::ERR_ABORTED": "", "net::ERR_FAILED": "", "net::ERR_CONTENT_LENGTH_MISMATCH": "", "": "",
    }
    refused = net_failure("https://kns.cnki.net/kns8s/AdvSearch", "net::ERR_NAME_NOT_RESOLVED")
    assert refused is not None and refused.code == "NETWORK_UNREACHABLE" and refused.fatal and refused.retryable
    assert refused.message.startswith("域名解析失败：")
    assert refused.details == {"reason": "dns", "url": "https://kns.cnki.net/kns8s/AdvSearch",
                               "net_error": "net::ERR_NAME_NOT_RESOLVED"}
    assert net_failure("https://kns.cnki.net/", "net::ERR_ABORTED") is None
    blocked = network_unreachable("https://kns.cnki.net/", "blocked", status=418)
    assert "HTTP 418" in blocked.message and blocked.details == {"reason": "blocked", "url": "https://kns.cnki.net/", "status": 418}


def test_an_unreached_site_with_nothing_found_must_fail() -> None:
    from cnki_mcp.core.errors import CnkiError, unreached_with_nothing

    unreachable = CnkiError("NETWORK_UNREACHABLE")
    assert unreached_with_nothing(unreachable, 0) is True
    assert unreached_with_nothing(unreachable, 3) is False  # what was found before the network went is kept
    assert unreached_with_nothing(CnkiError("SITE_UNAVAILABLE"), 0) is False
    assert unreached_with_nothing(None, 0) is False
    assert unreached_with_nothing(CnkiError("BROWSER_UNAVAILABLE"), 0) is True  # no screen: the browser never started
    assert unreached_with_nothing(CnkiError("BROWSER_UNAVAILABLE"), 3) is False


def test_a_list_the_browser_never_fetched_is_no_empty_answer_and_keeps_the_browsers_way_on() -> None:
    from cnki_mcp.core.errors import CnkiError, for_its_tool

    said = for_its_tool(CnkiError("BROWSER_UNAVAILABLE"), a_list=True, resumable="检索").message
    assert "这不代表没有文献" in said
    assert "网络恢复后" not in said


def test_a_418_answer_is_the_cdn_turning_the_network_away() -> None:
    from cnki_mcp.pages.page_state import classify_response

    problem = classify_response(418, "https://kns.cnki.net/kcms2/article/abstract?v=x", "<html>418 Request Blocked</html>")
    assert problem is not None and problem.code == "NETWORK_UNREACHABLE"
    assert problem.details["reason"] == "blocked"


def test_the_error_code_type_names_exactly_the_catalogued_codes() -> None:
    from typing import get_args

    from cnki_mcp.core.errors import CATALOGUE, ErrorCode

    assert list(get_args(ErrorCode)) == list(CATALOGUE)

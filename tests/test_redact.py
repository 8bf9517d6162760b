"""The one list of secrets: client URLs, snapshot URLs, page markup, error details, saved snapshots."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import LogRedaction, client_url, is_secret_key, redact_markup, redact_page, redact_url, without_secrets
from cnki_mcp.core.snapshots import SNAPSHOT_KEEP, save_snapshot
from tests.harness import REPO

READER_URL = (
    "https://kns.cnki.net/nzkhtml/xmlRead/trialRead.html?dbCode=CJFD&fileName=FX001"
    "&invoice=SECRET1&appId=KNS&nonce=SECRET2&access_token=SECRET3#frag"
)


def test_secret_keys_match_by_substring_in_any_case() -> None:
    assert is_secret_key("access_token")
    assert is_secret_key("VPN_Ticket")
    assert is_secret_key("pwd")
    assert is_secret_key("idenid")
    assert not is_secret_key("author")
    assert not is_secret_key("fileName")


def test_client_url_drops_access_values_opaque_keys_and_fragment() -> None:
    out = client_url(READER_URL)
    assert out == "https://kns.cnki.net/nzkhtml/xmlRead/trialRead.html?dbCode=CJFD&fileName=FX001&appId=KNS"
    assert client_url("https://bar.cnki.net/bar/download/order?id=SECRET") == "https://bar.cnki.net/bar/download/order"
    assert client_url("https://user:pw@kns.cnki.net/x?a=1") == "https://kns.cnki.net/x?a=1"


def test_redact_url_keeps_keys_and_replaces_values() -> None:
    out = redact_url("https://kns.cnki.net/kcms2/article/abstract?v=abc&uniplatform=NZKPT#vpn_ticket=T0K")
    assert out == "https://kns.cnki.net/kcms2/article/abstract?v=REDACTED&uniplatform=NZKPT#vpn_ticket=REDACTED"


def test_redact_markup_removes_secrets_and_keeps_the_rest() -> None:
    html = (
        '<a href="https://kns.cnki.net/kcms2/article/abstract?v=SECRETV&amp;uniplatform=NZKPT">t</a>'
        '<a href="https://kns.cnki.net/reader/xml?invoice=INV123&nonce=N0NCE&loginType=trialRead">r</a>'
        '<input type="hidden" id="hidTurnPage" value="CURSOR-SECRET"><input value="visible" type="text">'
        "<script>document.cookie='Ecp_ClientId=CLIENT123; SID_kns_new=SID456';var cfg={\"accessToken\":\"TOK789\"};"
        "xhr.setRequestHeader('Authorization', 'Bearer JWTVALUE123');</script>"
        '<input class="cbItem" type="checkbox" value="EXPORTID">'
    )
    cleaned = redact_markup(html)
    for secret in ("SECRETV", "INV123", "N0NCE", "CURSOR-SECRET", "CLIENT123", "SID456", "TOK789", "EXPORTID", "JWTVALUE123"):
        assert secret not in cleaned, secret
    assert "uniplatform=NZKPT" in cleaned
    assert "loginType=trialRead" in cleaned


def test_every_inputs_value_and_textarea_is_redacted() -> None:
    html = '<input value="typed by the user" type="text"><textarea name="q">我的笔记</textarea>'

    cleaned = redact_markup(html)

    assert cleaned == '<input value="REDACTED" type="text"><textarea name="q">REDACTED</textarea>'


@pytest.mark.parametrize(
    ("script", "secret"),
    [
        ("xhr.setRequestHeader(\"Authorization\", \"Basic QWxhZGRpbjpvcGVu\")", "QWxhZGRpbjpvcGVu"),
        ("headers = {Authorization: 'Token abc'}", "Token abc"),
        ("fetch(u, {headers: {'X-Auth-Token': 'AUTH42'}})", "AUTH42"),
        ("var jwt = \"eyJhbGciOi.J9.sig\";", "eyJhbGciOi"),
        ("var cfg = {pwd: 'hunter2', vpn_ticket: 'VT9'};", "hunter2"),
    ],
)
def test_secret_values_in_scripts_are_redacted(script: str, secret: str) -> None:
    cleaned = redact_markup(f"<script>{script}</script>")

    assert secret not in cleaned


def test_query_and_fragment_keys_match_by_substring() -> None:
    text = '<a href="https://x.cnki.net/p?my_access_token=A1#session_pwd=P2&page=3">'

    cleaned = redact_markup(text)

    assert cleaned == '<a href="https://x.cnki.net/p?my_access_token=REDACTED#session_pwd=REDACTED&page=3">'


def test_user_ids_in_data_attributes_are_redacted_and_paper_ids_kept() -> None:
    html = '<div data-userid="U42" data-account-name=\'alice\' data-filename="ZGYK202401001">'

    cleaned = redact_markup(html)

    assert cleaned == '<div data-userid="REDACTED" data-account-name="REDACTED" data-filename="ZGYK202401001">'


def test_a_kept_page_cannot_run() -> None:
    html = (
        '<body onload="boot()"><script src="/a.js"></script><script>steal(document.cookie)</script>'
        '<a href="javascript:go(1)" onclick=\'x()\'>go</a><p>正文</p></body>'
    )

    kept = redact_page(html)

    assert kept == (
        '<body><script><!-- removed --></script><script><!-- removed --></script><a href="#">go</a><p>正文</p></body>'
    )


def test_log_lines_are_redacted() -> None:
    record = logging.LogRecord("cnki_mcp", logging.INFO, __file__, 1, "fetching %s", ("https://x/r?invoice=INV1",), None)

    LogRedaction().filter(record)

    assert record.getMessage() == "fetching https://x/r?invoice=REDACTED"


def test_redact_markup_covers_json_text() -> None:
    text = '{"code":200,"data":{"invoice":"INV9","nonce":"N9","title":"数据治理"}}'
    assert redact_markup(text) == '{"code":200,"data":{"invoice":"REDACTED","nonce":"REDACTED","title":"数据治理"}}'


def test_without_secrets_rewrites_urls_in_details_only() -> None:
    error = without_secrets(CnkiError("CONTENT_NOT_READY", details={"url": READER_URL, "n": 1}))
    assert "SECRET" not in error.details["url"]
    assert error.details["n"] == 1


def test_save_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "diagnostics"
    path = save_snapshot(folder, "Detail Page", '<p>x</p><input type="hidden" value="tok">',
                         url="https://kns.cnki.net/kcms2/article/abstract?v=abc", screenshot=b"\x89PNG")
    text = path.read_text(encoding="utf-8")
    assert path.parent == folder
    assert path.name.startswith("detail-page-")
    assert path.suffix == ".html"
    assert "url=https://kns.cnki.net/kcms2/article/abstract?v=REDACTED" in text
    assert '"tok"' not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.with_suffix(".png").read_bytes() == b"\x89PNG"


def test_json_snapshot_and_pruning(tmp_path: Path) -> None:
    folder = tmp_path / "diagnostics"
    saved = save_snapshot(folder, "reader json", '{"invoice":"X1"}', url="https://kns.cnki.net/r", extension="json")
    assert saved.read_text(encoding="utf-8").splitlines() == [
        saved.read_text(encoding="utf-8").splitlines()[0],
        '{"invoice":"REDACTED"}',
    ]
    assert saved.read_text(encoding="utf-8").startswith("// cnki-mcp snapshot kind=reader-json url=https://kns.cnki.net/r ")
    for n in range(SNAPSHOT_KEEP + 3):
        save_snapshot(folder, "grid", f"<p>{n}</p>")
    assert len([p for p in folder.iterdir() if p.suffix in (".html", ".json")]) == SNAPSHOT_KEEP


@pytest.mark.parametrize("hostile", ["'ticket' * 40_000", "'a.' * 100_000", "'http://' * 30_000", "'\"ticket\":' * 30_000"])
def test_redaction_reads_hostile_text_in_linear_time(hostile: str) -> None:
    # In a child process, so that a quadratic pattern fails the test at the timeout instead of hanging it.
    code = f"from cnki_mcp.core.redact import redact_markup; redact_markup({hostile})"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=30, capture_output=True)
    assert done.returncode == 0, done.stderr[-500:]

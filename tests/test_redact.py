"""The one list of secrets: client URLs, snapshot URLs, page markup, error details, saved snapshots."""

from __future__ import annotations

import stat
from pathlib import Path

from cnki_mcp.errors import CnkiError
from cnki_mcp.redact import client_url, is_secret_key, redact_markup, redact_url, without_secrets
from cnki_mcp.snapshots import SNAPSHOT_KEEP, save_snapshot

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
    assert 'value="visible"' in cleaned


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

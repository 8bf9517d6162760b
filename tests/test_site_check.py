"""The field check's pure parts and the report: what a page yielded, the lines a person reads, the store's
recent errors and last check, scrubbing and the scan that refuses a report carrying a secret.

Arrange, act, then one exact assertion per line.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CATALOGUE, CnkiError
from cnki_mcp.core.errors_en import ERRORS_EN
from cnki_mcp.core.model import CheckStep, Paper, SessionState, SiteCheck
from cnki_mcp.core.redact import redact_markup
from cnki_mcp.fieldcheck.report import HIDDEN, build_report, find_secret, scrub_identity
from cnki_mcp.fieldcheck.tour import (
    FAILED_EN,
    FIELD_LABELS,
    FIELD_LABELS_EN,
    JOURNAL_FIELDS,
    LABELS_EN,
    LOCAL_CODES,
    STEPS,
    THESIS_FIELDS,
    detail_found,
    grid_found,
    grid_gaps,
    has_reader_entry,
    missing_fields,
    reader_candidates,
    render,
    shared_gaps,
    step_line,
)
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.serving import endpoint
from cnki_mcp.site.session import Sessions
from cnki_mcp.store.library import KEEP_ERROR_EVENTS, Store, error_counts, peek_store
from cnki_mcp.surface.tools import parse_arguments

JOURNAL_PAPER = Paper(
    title="大语言模型的演进逻辑研究",
    authors=["叶涵", "吕怡"],
    institutions=["示例大学"],
    abstract="摘要文字" * 10,
    keywords=["大模型"],
    source="中国科学",
    source_url="https://navi.cnki.net/knavi/detail?p=x",
    year=2026,
    document_type="期刊",
)
NAME = "植入用户名"


def row(n: int, **fields: object) -> Paper:
    base = {"title": f"题名{n}", "locator": f"https://kns.cnki.net/kcms2/article/abstract?v={n}",
            "authors": ["甲"], "source": "刊", "year": 2024, "document_type": "期刊"}
    return Paper(**(base | fields))  # type: ignore[arg-type]


def step(status: str, **fields: object) -> CheckStep:
    return CheckStep(name="grid", label="检索结果第 1 页", status=status, **fields)  # type: ignore[arg-type]


# --- what a page yielded ----------------------------------------------------------------------------


def test_a_complete_journal_page_lacks_nothing() -> None:
    gaps = missing_fields(JOURNAL_PAPER, JOURNAL_FIELDS)
    assert gaps == []


def test_a_journal_page_without_its_abstract_lacks_the_abstract() -> None:
    paper = Paper(title="题名", authors=["甲"], institutions=["乙"], keywords=["词"], source="刊", year=2024,
                  source_url="https://navi.cnki.net/x")
    gaps = missing_fields(paper, JOURNAL_FIELDS)
    assert gaps == ["摘要"]


def test_a_thesis_needs_no_year_or_source_from_its_page() -> None:
    thesis = Paper(title="题名", authors=["甲"], abstract="摘要", keywords=["词"], document_type="硕士")
    gaps = missing_fields(thesis, THESIS_FIELDS)
    assert gaps == []


def test_what_a_detail_page_yielded_is_listed_with_counts() -> None:
    found = detail_found(JOURNAL_PAPER)
    assert found == "读到 题名、作者 2、单位 1、摘要 40 字、关键词 1、来源、年份、期刊链接、文献类型 期刊"


def test_a_field_two_papers_lack_is_missing_from_the_page() -> None:
    gaps = shared_gaps(["摘要", "期刊链接"], ["期刊链接", "关键词"])
    assert gaps == ["期刊链接"]


def test_a_field_only_the_first_paper_lacks_is_that_papers_own() -> None:
    gaps = shared_gaps(["来源", "期刊链接"], [])
    assert gaps == []


def test_reader_candidates_are_unread_journal_papers_first_theses_last_and_no_books() -> None:
    rows = [row(1, document_type="硕士"), row(2, document_type="会议"), row(3), row(4, document_type="图书"),
            row(5, document_type="博士"), row(6), row(7, locator="")]
    candidates = reader_candidates(rows, {rows[2].locator})
    assert [paper.title for paper in candidates] == ["题名6", "题名2", "题名1", "题名5"]


def test_a_listing_page_with_full_rows_lacks_nothing() -> None:
    page = GridPage(rows=[row(1), row(2)], total=330, page=1, page_count=7, cursor="tp")
    gaps = grid_gaps(page, 1)
    assert gaps == []


def test_an_empty_listing_page_lacks_rows() -> None:
    gaps = grid_gaps(GridPage(), 1)
    assert gaps == ["结果行"]


def test_a_first_page_without_total_cursor_or_authors_says_each() -> None:
    page = GridPage(rows=[row(1, authors=[]), row(2, authors=[]), row(3)])
    gaps = grid_gaps(page, 1)
    assert gaps == ["结果总数", "翻页标记", "作者"]


def test_a_second_page_needs_no_cursor() -> None:
    page = GridPage(rows=[row(1)], total=3)
    gaps = grid_gaps(page, 2)
    assert gaps == []


def test_what_a_listing_page_yielded() -> None:
    page = GridPage(rows=[row(1), row(2, document_type="硕士", source="")], total=330, page=1, page_count=7)
    found = grid_found(page)
    assert found == "2 行，共 330 条，第 1/7 页，作者 2/2、来源 1/2、年份 2/2，类型 期刊、硕士"


def test_a_styled_reader_entry_is_a_dead_stand_in() -> None:
    html = '<ul><li class="btn-html"><a style="color:#999" href="#">HTML阅读</a></li></ul>'
    assert has_reader_entry(html) is False


def test_a_live_reader_entry_counts() -> None:
    html = '<ul><li class="btn-html"><a id="htmlRead" href="https://bar.cnki.net/o">HTML阅读</a></li></ul>'
    assert has_reader_entry(html) is True


# --- the lines a person reads -----------------------------------------------------------------------


def test_a_passed_step_line() -> None:
    line = step_line(step("ok", found="50 行", requests=1, seconds=0.4))
    assert line == "✓ 检索结果第 1 页：50 行（1 次请求，0.4 秒）"


def test_a_failed_step_line_names_the_code_and_the_snapshot() -> None:
    failed = step("failed", code="PARSER_UNSUPPORTED", message="检索结果页结构不受支持", snapshot="grid-1.html", requests=1, seconds=1.0)
    assert step_line(failed) == "✗ 检索结果第 1 页：PARSER_UNSUPPORTED 检索结果页结构不受支持。快照 diagnostics/grid-1.html（1 次请求，1.0 秒）"


def test_a_skipped_step_line_says_why() -> None:
    line = step_line(step("skipped", message="没有取得检索请求的格式"))
    assert line == "– 检索结果第 1 页：未检查，没有取得检索请求的格式"


def test_the_summary_line_counts_steps_requests_and_seconds() -> None:
    check = SiteCheck(status="passed", started_at="t", browser="Chrome/131.0", requests=9, seconds=7.2, steps=[step("ok", found="x")])
    assert render(check)[-1] == "1/1 项通过，9 次请求，7.2 秒，浏览器 Chrome/131.0；页面结构与预期一致。"


def test_a_check_with_a_skipped_step_passes_and_counts_it_apart() -> None:
    skipped = CheckStep(name="reader", label="HTML 阅读", status="skipped", message="读过的 4 篇论文的详情页都没有入口")
    check = SiteCheck(status="passed", started_at="t", requests=9, seconds=7.2, steps=[step("ok", found="x"), skipped])
    assert render(check)[-1] == "1/2 项通过，1 项未检查（标 –），9 次请求，7.2 秒；页面结构与预期一致。"


# --- the same lines in English (doctor --site with CNKI_LANG=en) ------------------------------------


HAN = re.compile(r"[\u4e00-\u9fff]")


def test_english_step_lines() -> None:
    label = LABELS_EN["grid"]
    ok = CheckStep(name="grid", label=label, status="ok", found="50 rows", requests=1, seconds=0.4)
    failed = CheckStep(name="grid", label=label, status="failed", code="SITE_STRUCTURE_CHANGED", found="3 rows",
                       message="the page does not look as expected, it lacks: the total.", snapshot="grid-1.html", requests=1, seconds=1.0)
    blocked = CheckStep(name="grid", label=label, status="blocked", code="RATE_LIMITED", message=ERRORS_EN["RATE_LIMITED"])
    assert step_line(ok, english=True) == "✓ Results, page 1: 50 rows (1 requests, 0.4 s)"
    assert step_line(failed, english=True) == ("✗ Results, page 1: SITE_STRUCTURE_CHANGED the page does not look as expected, it lacks: "
                                               "the total. Found: 3 rows. Snapshot diagnostics/grid-1.html (1 requests, 1.0 s)")
    assert step_line(blocked, english=True) == ("! Results, page 1: RATE_LIMITED CNKI limits the request rate (HTTP 429): "
                                                "try again later. (0 requests, 0.0 s)")


def test_english_summary_lines() -> None:
    skipped = CheckStep(name="reader", label=LABELS_EN["reader"], status="skipped", message="no reader entry")
    ok = CheckStep(name="grid", label=LABELS_EN["grid"], status="ok", found="x")
    passed = SiteCheck(status="passed", started_at="t", browser="Chrome/131.0", requests=9, seconds=7.2, steps=[ok, skipped])
    blocked = SiteCheck(status="blocked", started_at="t", requests=2, seconds=1.0, steps=[ok])
    assert render(passed, english=True)[-1] == (
        "1/2 passed, 1 not checked (marked –), 9 requests, 7.2 s, browser Chrome/131.0; the pages look as expected."
    )
    assert render(blocked, english=True)[-1].endswith("then run the check again.")
    assert render(passed, english=True)[1] == "– HTML reader: not checked, no reader entry"


def test_every_english_word_of_the_check_is_english() -> None:
    page = GridPage(rows=[row(1), row(2)], total=2, page=1, page_count=1)
    words = [*LABELS_EN.values(), *FIELD_LABELS_EN.values(), *ERRORS_EN.values(), FAILED_EN,
             detail_found(Paper(title="t", abstract="a", keywords=["k"]), english=True), grid_found(page, english=True).replace("期刊", ""),
             *grid_gaps(GridPage(rows=[]), 1, english=True), *missing_fields(Paper(), JOURNAL_FIELDS, english=True)]
    assert [word for word in words if HAN.search(word)] == []
    assert set(LOCAL_CODES) <= set(ERRORS_EN) and set(LABELS_EN) == {name for name, _ in STEPS}
    assert set(FIELD_LABELS_EN) == set(FIELD_LABELS)


def test_the_new_codes_are_in_the_catalogue() -> None:
    assert "SITE_STRUCTURE_CHANGED" in CATALOGUE
    assert "REPORT_UNSAFE" in CATALOGUE


def test_diagnostics_takes_site_check_as_an_addition() -> None:
    assert parse_arguments("diagnostics", {"site_check": True}).site_check is True
    assert parse_arguments("diagnostics", {}).site_check is False


# --- the store ----------------------------------------------------------------------------------


def test_recent_errors_keep_the_newest(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(KEEP_ERROR_EVENTS + 5):
        store.note_error("RATE_LIMITED" if n else "PARSER_UNSUPPORTED", "search")
    events = store.data.recent_errors
    store.close_sync()
    assert len(events) == KEEP_ERROR_EVENTS
    assert {event.code for event in events} == {"RATE_LIMITED"}


def test_error_counts_group_codes_most_frequent_first(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for code in ("A_CODE", "B_CODE", "B_CODE"):
        store.note_error(code)
    counts = error_counts(store.data.recent_errors)
    store.close_sync()
    assert [(entry["code"], entry["count"]) for entry in counts] == [("B_CODE", 2), ("A_CODE", 1)]


def test_the_last_check_and_header_names_are_kept_and_read_without_the_lock(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.put_site_check(SiteCheck(status="passed", started_at="t1"), ["示例大学", NAME])
    store.put_site_check(SiteCheck(status="failed", started_at="t2"), [NAME])
    store.flush()
    data = peek_store(tmp_path)  # while the store still holds the directory lock
    store.close_sync()
    assert data is not None and data.last_site_check is not None
    assert data.last_site_check.started_at == "t2"
    assert data.known_names == ["示例大学", NAME]


# --- scrubbing and scanning -----------------------------------------------------------------------


def test_the_header_identity_elements_are_hidden() -> None:
    header = '<div class="ecp_header_personalName_loginbg" title="张三"><span class="ecp_header_personalName">张三</span></div>'
    scrubbed = scrub_identity(header, [])
    assert scrubbed == f'<div class="ecp_header_personalName_loginbg" title="{HIDDEN}"><span class="ecp_header_personalName">{HIDDEN}</span></div>'


def test_a_known_name_is_hidden_also_percent_encoded() -> None:
    text = f"<p>欢迎 {NAME}</p><a href='/x?unit=%E6%A4%8D%E5%85%A5%E7%94%A8%E6%88%B7%E5%90%8D'>"
    scrubbed = scrub_identity(text, [NAME])
    assert scrubbed == f"<p>欢迎 {HIDDEN}</p><a href='/x?unit={HIDDEN}'>"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Ecp_ClientId=4a5b6c7d8e; path=/", "Cookie"),
        ("Cookie: visitor=abcdef123456", "Cookie"),
        ("https://kns.cnki.net/x?ticket=ST-12345-abcdef&a=1", "票据或令牌"),
        ('{"accessToken": "abcdef123456"}', "票据或令牌"),
        ("Authorization: Bearer abcdefghijklmnop", "票据或令牌"),
        ("/x?unit=%E6%A4%8D%E5%85%A5%E7%94%A8%E6%88%B7%E5%90%8D", "你的姓名或机构名称"),
        ("/login?ReturnUrl=https%3A%2F%2Fx%2Fy%3Fticket%3DST-12345-abcdef%26v%3D1", "票据或令牌"),  # read decoded
        ("/sso?a=1&amp;ticket&#61;ST-12345-abcdef", "票据或令牌"),
        ('"https://x/?ticket\\u003dST-12345-abcdef"', "票据或令牌"),
        ("Ecp_ClientId=REDACTED; https://kns.cnki.net/x?ticket=REDACTED", ""),
        ("<p>相关推荐：SCI 复合影响因子：99.99</p>", ""),
    ],
)
def test_the_scan_sees_cookies_tickets_and_known_names(text: str, kind: str) -> None:
    assert find_secret(text, [NAME]) == kind


# --- the report ---------------------------------------------------------------------------------


def data_dir(tmp_path: Path, snapshot: str) -> Path:
    root = tmp_path / "data"
    store = Store.open(root)
    check = SiteCheck(status="failed", started_at="t", steps=[step("failed", code="PARSER_UNSUPPORTED", snapshot="grid-1.html")])
    store.put_site_check(check, [NAME])
    store.note_error("PARSER_UNSUPPORTED", "site_check")
    store.close_sync()
    (root / "diagnostics" / "grid-1.html").write_text(snapshot, encoding="utf-8")
    (root / "diagnostics" / "grid-1.png").write_bytes(b"\x89PNG")
    (root / "downloads" / "paper.pdf").write_bytes(b"%PDF-")
    return root


def test_the_report_holds_what_its_readme_lists_and_no_name(tmp_path: Path) -> None:
    root = data_dir(tmp_path, f'<div class="ecp_header_unitName" title="示例大学">示例大学</div><p>{NAME}</p>')
    path = build_report(root)
    archive = zipfile.ZipFile(path)
    names = sorted(archive.namelist())
    text = "".join(archive.read(name).decode() for name in names)
    assert path.parent == root / "diagnostics"
    assert names == [f"cnki-mcp-report/{name}" for name in (
        "README.md", "environment.json", "errors.json", "site-check.json", "site-check.txt", "snapshots/grid-1.html",
    )]
    assert NAME not in text
    assert "示例大学" not in text
    assert '"code": "PARSER_UNSUPPORTED"' in archive.read("cnki-mcp-report/errors.json").decode()


def test_a_report_with_a_cookie_left_in_a_snapshot_is_refused_and_not_written(tmp_path: Path) -> None:
    root = data_dir(tmp_path, "<pre>Cookie: visitor=abcdef123456</pre>")
    with pytest.raises(CnkiError) as refused:
        build_report(root)
    assert refused.value.code == "REPORT_UNSAFE"
    assert refused.value.details == {"file": "diagnostics/grid-1.html", "kind": "Cookie"}
    assert "abcdef123456" not in refused.value.message
    assert list((root / "diagnostics").glob("report-*.zip")) == []


def test_names_a_login_observes_are_remembered_for_reports() -> None:
    seen: list[str] = []
    sessions = Sessions(None, seen.extend)  # type: ignore[arg-type]  # no site needed to observe a state
    sessions._observed(SessionState(institution="observed", institution_evidence=["示例大学"], personal_evidence=[NAME]))
    assert seen == ["示例大学", NAME]


def test_remembered_names_are_kept_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.remember_names(["甲大学", NAME])
    store.remember_names(["甲大学"])
    store.remember_names(["乙大学", "甲大学"])
    names = store.data.known_names
    store.close_sync()
    assert names == [NAME, "乙大学", "甲大学"]


# Twenty forms a secret takes in a saved page or a log line; every value is unique so that a leak names its form.
PLANTED = [
    "Set-Cookie: Ecp_ClientId=V01secretvalue; path=/",
    "Cookie: JSESSIONID=V02secretvalue",
    "<a href='https://kns.cnki.net/x?ticket=V03secretvalue&a=1'>",
    "<a href='/x?a=1&amp;token=V04secretvalue'>",
    "<a href='/x#access_token=V05secretvalue'>",
    '{"accessToken": "V06secretvalue"}',
    "xhr.setRequestHeader('Authorization', 'V07secretvalue')",
    "Authorization: Bearer V08secretvalue",
    "<input type=hidden name=cursor value='V09secretvalue'>",
    "<textarea>V10secretvalue</textarea>",
    '<span data-userid="V11secretvalue">',
    "https://user:V12secretvalue@vpn.example.edu/",
    "wengine_vpn_ticketwebvpn_example_edu=V13secretvalue",
    "var sid = { 'sessionid': 'V14secretvalue' };",
    # The six the red team found leaking:
    "<a href='/login?ReturnUrl=https%3A%2F%2Fkns.cnki.net%2Fkns8s%2Fdefault%3Fticket%3DV15secretvalue%26v%3D1'>",
    "<a href='/sso?service=x&ticket&#61;V16secretvalue'>",
    '{"next": "https://kns.cnki.net/?ticket\\u003dV17secretvalue\\u0026x=1"}',
    "<!-- ticket=V18secretvalue -->",
    '{"access_key": "V19secretvalue"}',
]


def test_no_planted_secret_form_reaches_the_report(tmp_path: Path) -> None:
    root = data_dir(tmp_path, "<html><body>" + "\n".join(PLANTED) + "</body></html>")
    # The twentieth: the data directory's own HTTP token, quoted in a diagnostics file.
    http_token = endpoint.token(root)
    (root / "diagnostics" / "grid-2.json").write_text(json.dumps({"headers": {"x-auth": http_token}}), encoding="utf-8")

    archive = zipfile.ZipFile(build_report(root))
    text = "".join(archive.read(name).decode() for name in archive.namelist())

    leaked = [f"V{n:02d}" for n in range(1, 20) if f"V{n:02d}secretvalue" in text]
    assert leaked == []
    assert http_token not in text
    assert not [name for name in archive.namelist() if "http-token" in name]


def test_log_lines_get_the_same_rules_as_reports() -> None:
    lines = [redact_markup(line) for line in PLANTED]
    assert [n + 1 for n, line in enumerate(lines) if f"V{n + 1:02d}secretvalue" in line] == []

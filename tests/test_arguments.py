"""tools.parse_arguments: structural checks, range and enum rules in the documented order, and defaults."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.surface.tools import REGISTRY
from cnki_mcp.surface.tools import parse_arguments as parse
from cnki_mcp.tools._searching import NativeOptions, SearchOptions
from cnki_mcp.tools.author_papers import Args as AuthorPapersArgs
from cnki_mcp.tools.check_references import Args as CheckReferencesArgs
from cnki_mcp.tools.diagnostics import Args as DiagnosticsArgs
from cnki_mcp.tools.download_paper import Args as DownloadPaperArgs
from cnki_mcp.tools.download_papers import Args as DownloadPapersArgs
from cnki_mcp.tools.expert_search import Args as ExpertSearchArgs
from cnki_mcp.tools.export_citations import Args as ExportCitationsArgs
from cnki_mcp.tools.get_metadata import METADATA_FIELDS
from cnki_mcp.tools.get_metadata import Args as GetMetadataArgs
from cnki_mcp.tools.journal_issues import Args as JournalIssuesArgs
from cnki_mcp.tools.link_references import Args as LinkReferencesArgs
from cnki_mcp.tools.login import Args as LoginArgs
from cnki_mcp.tools.operation_control import Args as OperationControlArgs
from cnki_mcp.tools.operation_status import Args as OperationStatusArgs
from cnki_mcp.tools.read_online_html import Args as ReadOnlineHtmlArgs
from cnki_mcp.tools.related_papers import Args as RelatedPapersArgs
from cnki_mcp.tools.save_to_zotero import Args as SaveToZoteroArgs
from cnki_mcp.tools.search import Args as SearchArgs
from cnki_mcp.tools.search_facets import Args as SearchFacetsArgs
from cnki_mcp.tools.search_results import Args as SearchResultsArgs
from cnki_mcp.tools.session_status import Args as SessionStatusArgs
from cnki_mcp.tools.structured_search import Args as StructuredSearchArgs
from cnki_mcp.tools.watch import Args as WatchArgs

EXPR = {"field": "title", "value": "违约金"}


def code_of(tool: str, raw: Any) -> str:
    with pytest.raises(CnkiError) as caught:
        parse(tool, raw)
    return caught.value.code


# --- defaults: minimal input gives complete values ---------------------------------------------


DEFAULTS: list[tuple[str, dict[str, Any], msgspec.Struct]] = [
    ("diagnostics", {}, DiagnosticsArgs()),
    (
        "search",
        {"query": "  初中物理 分层作业 "},
        SearchArgs(
            query="初中物理 分层作业",
            mode="balanced",
            limit=50,
            year_from=0,
            year_to=0,
            concept_groups=[],
            options=SearchOptions(
                on_verification="ask",
                sort="relevance",
                candidate_target=300,
                max_pages=5,
                max_requests=600,
                timeout_seconds=900,
                metadata="ranked",
                freshness="prefer_cache",
            ),
        ),
    ),
    (
        "structured_search",
        {"expression": EXPR},
        StructuredSearchArgs(
            expression=EXPR,
            limit=50,
            sort="relevance",
            options=NativeOptions(candidate_target=50, metadata="basic"),
        ),
    ),
    (
        "expert_search",
        {"expression": "TI='违约金'"},
        ExpertSearchArgs(
            expression="TI='违约金'",
            limit=50,
            sort="relevance",
            options=NativeOptions(candidate_target=50, metadata="basic"),
        ),
    ),
    ("search_facets", {"search_id": " op_1 "}, SearchFacetsArgs(search_id="op_1", limit=10, freshness="prefer_cache", on_verification="ask")),
    ("search_results", {"search_id": "op_1"}, SearchResultsArgs(search_id="op_1", scope="selected", view="titles", offset=0, limit=50)),
    ("get_metadata", {"record_refs": ["rec_a"]}, GetMetadataArgs(record_refs=["rec_a"], scope="selected", limit=50)),
    ("read_online_html", {"record_ref": "rec_a"}, ReadOnlineHtmlArgs(record_ref="rec_a", max_characters=20000, on_verification="ask")),
    ("author_papers", {"author": " 郑丽 "}, AuthorPapersArgs(author="郑丽", limit=50, on_verification="ask")),
    ("journal_issues", {"issn": " 1004-1303 "}, JournalIssuesArgs(issn="1004-1303", limit=50, on_verification="ask")),
    ("related_papers", {"record_ref": "rec_a"}, RelatedPapersArgs(record_ref="rec_a", relation="references", limit=50, wait_seconds=40, on_verification="ask")),
    ("save_to_zotero", {"search_id": "op_1"}, SaveToZoteroArgs(search_id="op_1", scope="selected", attach=True)),
    ("download_paper", {"title": "再论违约金调整"}, DownloadPaperArgs(title="再论违约金调整", format="auto", wait_seconds=120, on_verification="ask")),
    ("download_papers", {"search_id": "op_1"}, DownloadPapersArgs(
        search_id="op_1", scope="selected", offset=0, limit=20, format="auto", interval_seconds=12, wait_seconds=120, on_verification="ask",
    )),
    ("export_citations", {"search_id": "op_1"}, ExportCitationsArgs(search_id="op_1", scope="selected", format="gbt7714")),
    ("link_references", {"text": "见《论违约金》"}, LinkReferencesArgs(text="见《论违约金》", lookup_missing=False)),
    ("login", {}, LoginArgs(remote_access_url="", force=False)),
    ("session_status", {}, SessionStatusArgs(refresh=False)),
    ("operation_status", {}, OperationStatusArgs(operation_id="", wait_seconds=0)),
    ("operation_control", {"action": "cancel"}, OperationControlArgs(action="cancel")),
    ("watch", {"action": "list"}, WatchArgs(action="list", name="", tool="search", arguments={})),
    (
        "check_references",
        {"text": "参考文献\n[1] 王利明. 论违约金[J]. 法学评论, 2021(3): 1-9.\n[2] 见第三章\n"},
        CheckReferencesArgs(
            text="参考文献\n[1] 王利明. 论违约金[J]. 法学评论, 2021(3): 1-9.\n[2] 见第三章\n",
            references=["[1] 王利明. 论违约金[J]. 法学评论, 2021(3): 1-9.", "[2] 见第三章"],
            style="gbt7714",
            on_verification="ask",
        ),
    ),
]


@pytest.mark.parametrize(("tool", "raw", "expected"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_minimal_input_gets_documented_defaults(tool: str, raw: dict[str, Any], expected: msgspec.Struct) -> None:
    assert parse(tool, raw) == expected


def test_every_tool_has_a_struct_and_a_defaults_case() -> None:
    assert {d[0] for d in DEFAULTS} == set(REGISTRY)


def test_zero_and_empty_mean_the_default() -> None:
    args = parse(
        "search",
        {
            "query": "q",
            "mode": "",
            "limit": 0,
            "options": {
                "on_verification": "",
                "sort": "",
                "candidate_target": 0,
                "max_pages": 0,
                "max_requests": 0,
                "timeout_seconds": 0,
                "metadata": "",
                "freshness": "",
            },
        },
    )
    assert args == parse("search", {"query": "q"})
    assert parse("read_online_html", {"title": "t", "max_characters": 0}).max_characters == 20000
    assert parse("download_paper", {"title": "t", "wait_seconds": 0}).wait_seconds == 120
    assert parse("search_results", {"search_id": "s", "limit": 0, "scope": "", "view": ""}) == parse(
        "search_results", {"search_id": "s"}
    )
    assert parse("export_citations", {"record_refs": ["r"], "format": "", "scope": ""}).format == "gbt7714"


def test_none_arguments_and_null_optional_values_mean_not_given() -> None:
    assert parse("diagnostics", None) == DiagnosticsArgs()
    args = parse("get_metadata", {"record_refs": None, "titles": ["题名"], "fields": None, "limit": None})
    assert args.record_refs == [] and args.fields == [] and args.titles == ["题名"] and args.limit == 50
    assert parse("search", {"query": "q", "concept_groups": None}).concept_groups == []
    assert parse("search", {"query": "q", "options": None, "mode": None}) == parse("search", {"query": "q"})
    assert parse("search", {"query": "q", "options": {"max_pages": None}}).options.max_pages == 5
    structured = parse("structured_search", {"expression": EXPR, "limit": 10, "options": {"candidate_target": None}})
    assert structured.options.candidate_target == 10


def test_explicit_values_are_kept() -> None:
    args = parse(
        "search",
        {
            "query": "竞业限制 违约金",
            "mode": "precise",
            "limit": 100,
            "year_from": 2020,
            "year_to": 2020,
            "concept_groups": [["竞业限制"], ["违约金", "违约责任"]],
            "options": {
                "on_verification": "skip",
                "sort": "cited_desc",
                "candidate_target": 3000,
                "max_pages": 100,
                "max_requests": 5000,
                "timeout_seconds": 7200,
                "metadata": "all",
                "freshness": "live",
            },
        },
    )
    assert (args.mode, args.limit, args.year_from, args.year_to) == ("precise", 100, 2020, 2020)
    assert args.concept_groups == [["竞业限制"], ["违约金", "违约责任"]]
    assert args.options == SearchOptions(
        on_verification="skip",
        sort="cited_desc",
        candidate_target=3000,
        max_pages=100,
        max_requests=5000,
        timeout_seconds=7200,
        metadata="all",
        freshness="live",
    )


# --- structured_search: sort merge, basic metadata, candidate target from limit ------------------


def test_structured_search_derives_options_from_top_level() -> None:
    args = parse("structured_search", {"expression": EXPR, "limit": 20, "sort": "date_desc"})
    assert args.options.sort == "date_desc" and args.sort == "date_desc"
    assert args.options.candidate_target == 20
    assert args.options.metadata == "basic"


def test_structured_search_explicit_options_win() -> None:
    args = parse(
        "structured_search",
        {
            "expression": EXPR,
            "sort": "date_desc",
            "options": {"sort": "cited_desc", "metadata": "ranked", "candidate_target": 400},
        },
    )
    assert (args.sort, args.options.sort) == ("cited_desc", "cited_desc")
    assert args.options.metadata == "ranked"
    assert args.options.candidate_target == 400


def test_structured_search_expression_is_passed_through_untouched() -> None:
    tree = {"op": "or", "items": [EXPR, {"op": "not", "items": [{"field": "title", "value": "b"}]}]}
    assert parse("structured_search", {"expression": tree}).expression == tree


# --- clamps the specification asks for ----------------------------------------------------------


@pytest.mark.parametrize(("given", "clamped"), [(-5, 0), (0, 0), (30, 30), (55, 55), (56, 55), (10_000, 55)])
def test_operation_status_wait_is_clamped(given: int, clamped: int) -> None:
    assert parse("operation_status", {"wait_seconds": given}).wait_seconds == clamped


def test_operation_control_negative_additions_count_as_zero() -> None:
    args = parse("operation_control", {"action": "continue", "operation_id": "op_1", "additional_requests": -3, "additional_seconds": -1})
    assert (args.additional_requests, args.additional_seconds) == (0, 0)
    args = parse("operation_control", {"action": "continue", "additional_requests": 5000, "additional_seconds": 7200})
    assert (args.additional_requests, args.additional_seconds) == (5000, 7200)


# --- boundaries that pass -------------------------------------------------------------------------


VALID: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "字" * 1000}),
    ("search", {"query": "q", "limit": 1, "year_from": 2200}),
    ("search", {"query": "q", "year_from": 2024, "year_to": 0}),
    ("search", {"query": "q", "concept_groups": [["词" * 80] * 6] * 8}),
    ("search", {"query": "q", "mode": "broad"}),
    ("structured_search", {"expression": {}, "limit": 100, "options": {"candidate_target": 3000}}),
    ("search_results", {"search_id": "s", "offset": 10_000, "limit": 100, "scope": "candidates", "view": "records"}),
    ("get_metadata", {"record_refs": ["r"] * 60, "titles": ["t"] * 40, "fields": ["abstract", "quality", "doi"]}),
    ("get_metadata", {"search_id": "s", "limit": 100, "offset": 0, "scope": "eligible", "local_only": True}),
    ("read_online_html", {"title": "t", "offset": 0, "max_characters": 200_000, "section": "一、引言", "on_verification": "skip"}),
    ("download_paper", {"record_ref": "r", "wait_seconds": 1, "format": "caj", "retry": True}),
    ("related_papers", {"title": "t", "relation": "citing", "limit": 100, "wait_seconds": 55, "on_verification": "skip"}),
    ("related_papers", {"cursor": "rp1.abc", "limit": 1}),
    ("download_paper", {"record_ref": "r", "wait_seconds": 900, "format": "pdf", "filename": "a.pdf", "subdirectory": "x"}),
    ("export_citations", {"titles": ["t"] * 100, "format": "csl_json", "filename": "out.json"}),
    ("export_citations", {"record_refs": ["r"], "format": "custom", "template": "{title}"}),
    ("link_references", {"text": "字" * 174_762 + "ab", "lookup_missing": True}),  # exactly 512 KiB
    ("login", {"remote_access_url": "https://vpn.example.edu.cn/portal", "force": True}),
    ("session_status", {"refresh": True}),
    ("operation_control", {"action": "recover"}),
    ("operation_control", {"action": "show", "operation_id": "op_1"}),
]


@pytest.mark.parametrize(("tool", "raw"), VALID, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALID)])
def test_boundary_values_are_accepted(tool: str, raw: dict[str, Any]) -> None:
    assert isinstance(parse(tool, raw), REGISTRY[tool].arguments)


# --- rejections ----------------------------------------------------------------------------------

WORD = "词"
INVALID: list[tuple[str, Any, str]] = [
    # search_facets: one listing, known facets, entries per facet, codes that can narrow
    ("search_facets", {}, "INVALID_INPUT"),
    ("search_facets", {"search_id": "op_1", "expression": {"field": "title", "value": "的"}}, "INVALID_INPUT"),
    ("search_facets", {"search_id": "op_1", "year_from": 2020}, "INVALID_INPUT"),
    ("search_facets", {"search_id": "op_1", "facets": ["colour"]}, "INVALID_FACET"),
    ("search_facets", {"search_id": "op_1", "limit": 51}, "INVALID_LIMIT"),
    ("search_facets", {"search_id": "op_1", "freshness": "stale"}, "INVALID_FRESHNESS"),
    ("search_facets", {"search_id": "op_1", "facet_filters": {"year": ["CCL=I140"]}}, "INVALID_FACET_FILTER"),
    ("structured_search", {"expression": {"field": "title", "value": "的"}, "facet_filters": {"fund": []}}, "INVALID_FACET_FILTER"),
    ("expert_search", {"expression": "TI='的'", "facet_filters": {"colour": ["x"]}}, "INVALID_FACET"),
    # structure: unknown fields, wrong types, missing required fields
    ("nope", {}, "UNKNOWN_TOOL"),
    ("search", ["q"], "INVALID_INPUT"),
    ("diagnostics", {"verbose": True}, "INVALID_INPUT"),
    ("search", {}, "INVALID_INPUT"),
    ("search", {"query": None}, "INVALID_INPUT"),
    ("search", {"query": "q", "bogus": 1}, "INVALID_INPUT"),
    ("search", {"query": "q", "options": {"pages": 3}}, "INVALID_INPUT"),
    ("search", {"query": "q", "options": []}, "INVALID_INPUT"),
    ("search_results", {"search_id": None}, "INVALID_INPUT"),
    ("operation_control", {"action": None}, "INVALID_INPUT"),
    ("search", {"query": "q", "limit": "10"}, "INVALID_INPUT"),
    ("search", {"query": "q", "limit": 10.0}, "INVALID_INPUT"),
    ("search", {"query": "q", "limit": True}, "INVALID_INPUT"),
    ("search", {"query": "q", "concept_groups": [["a", 1]]}, "INVALID_INPUT"),
    ("search", {"query": "q", "concept_groups": ["a"]}, "INVALID_INPUT"),
    ("structured_search", {}, "INVALID_INPUT"),
    ("structured_search", {"expression": "title=a"}, "INVALID_INPUT"),
    ("structured_search", {"expression": [EXPR]}, "INVALID_INPUT"),
    ("search_results", {}, "INVALID_INPUT"),
    ("get_metadata", {"titles": "一个题名"}, "INVALID_INPUT"),
    ("read_online_html", {"record_ref": 12}, "INVALID_INPUT"),
    ("download_paper", {"record_ref": "r", "retry": "yes"}, "INVALID_INPUT"),
    ("export_citations", {"record_refs": ["r"], "filename": 3}, "INVALID_INPUT"),
    ("link_references", {}, "INVALID_INPUT"),
    ("link_references", {"text": "t", "lookup_missing": 1}, "INVALID_INPUT"),
    ("login", {"force": "true"}, "INVALID_INPUT"),
    ("session_status", {"refresh": "yes"}, "INVALID_INPUT"),
    ("operation_status", {"wait_seconds": "10"}, "INVALID_INPUT"),
    ("operation_status", {"id": "op_1"}, "INVALID_INPUT"),
    ("operation_control", {}, "INVALID_INPUT"),
    ("operation_control", {"action": "cancel", "additional_requests": 1.5}, "INVALID_INPUT"),
    ("check_references", {}, "REFERENCES_REQUIRED"),
    ("check_references", {"text": " \n "}, "REFERENCES_REQUIRED"),
    ("check_references", {"text": "a", "references": ["b"]}, "REFERENCES_REQUIRED"),
    ("check_references", {"text": "参考文献\n"}, "REFERENCES_REQUIRED"),
    ("check_references", {"references": "王利明. 论违约金[J]."}, "INVALID_INPUT"),
    ("check_references", {"references": ["王利明. 论违约金[J]."] * 201}, "TOO_MANY_ENTRIES"),
    ("check_references", {"text": "\n".join(f"[{i}] 论违约金{i}" for i in range(1, 202))}, "TOO_MANY_ENTRIES"),
    ("check_references", {"text": "字" * 180_000}, "INPUT_TOO_LARGE"),
    ("check_references", {"references": ["a"], "style": "bibtex"}, "INVALID_FORMAT"),
    ("check_references", {"references": ["a"], "on_verification": "wait"}, "INVALID_POLICY"),
    # search ranges and enums
    ("search", {"query": ""}, "INVALID_QUERY"),
    ("search", {"query": " \n\t "}, "INVALID_QUERY"),
    ("search", {"query": "字" * 1001}, "INVALID_QUERY"),
    ("search", {"query": "q", "mode": "deep"}, "INVALID_MODE"),
    ("search", {"query": "q", "limit": 101}, "INVALID_LIMIT"),
    ("search", {"query": "q", "limit": -1}, "INVALID_LIMIT"),
    ("search", {"query": "q", "year_from": -1}, "INVALID_YEAR"),
    ("search", {"query": "q", "year_to": 2201}, "INVALID_YEAR"),
    ("search", {"query": "q", "year_from": 2021, "year_to": 2020}, "INVALID_YEAR"),
    ("search", {"query": "q", "options": {"on_verification": "wait"}}, "INVALID_POLICY"),
    ("search", {"query": "q", "options": {"sort": "newest"}}, "INVALID_SORT"),
    ("search", {"query": "q", "options": {"candidate_target": 3001}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"candidate_target": -1}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"max_pages": 101}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"max_requests": 5001}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"timeout_seconds": 7201}}, "INVALID_OPTION"),
    ("search", {"query": "物理", "options": {"metadata": "full"}}, "INVALID_METADATA"),
    ("search", {"query": "q", "options": {"freshness": "fresh"}}, "INVALID_FRESHNESS"),
    ("search", {"query": "q", "concept_groups": [[WORD]] * 9}, "INVALID_PLAN"),
    ("search", {"query": "q", "concept_groups": [[WORD] * 7]}, "INVALID_PLAN"),
    ("search", {"query": "q", "concept_groups": [[]]}, "INVALID_PLAN"),
    ("search", {"query": "q", "concept_groups": [[WORD], None]}, "INVALID_PLAN"),
    ("search", {"query": "q", "concept_groups": [["  "]]}, "INVALID_PLAN"),
    ("search", {"query": "q", "concept_groups": [[WORD * 81]]}, "INVALID_PLAN"),
    # structured_search
    ("structured_search", {"expression": EXPR, "limit": 101}, "INVALID_LIMIT"),
    # expert_search: the shared rules; the expression itself is read when the search is planned
    ("expert_search", {}, "INVALID_INPUT"),
    ("expert_search", {"expression": EXPR}, "INVALID_INPUT"),
    ("expert_search", {"expression": "TI='a'", "sort": "newest"}, "INVALID_SORT"),
    ("expert_search", {"expression": "TI='a'", "year_from": 2030, "year_to": 2020}, "INVALID_YEAR"),
    ("structured_search", {"expression": EXPR, "year_from": 2030, "year_to": 2020}, "INVALID_YEAR"),
    ("structured_search", {"expression": EXPR, "sort": "newest"}, "INVALID_SORT"),
    ("structured_search", {"expression": EXPR, "options": {"on_verification": "never"}}, "INVALID_POLICY"),
    ("structured_search", {"expression": EXPR, "options": {"max_pages": 500}}, "INVALID_OPTION"),
    ("structured_search", {"expression": EXPR, "options": {"metadata": "full"}}, "INVALID_METADATA"),
    ("structured_search", {"expression": EXPR, "options": {"freshness": "stale"}}, "INVALID_FRESHNESS"),
    # search_results
    ("search_results", {"search_id": "s", "scope": "all"}, "INVALID_SCOPE"),
    ("search_results", {"search_id": "s", "view": "full"}, "INVALID_VIEW"),
    ("search_results", {"search_id": "s", "offset": -1}, "INVALID_OFFSET"),
    ("search_results", {"search_id": "s", "limit": 101}, "INVALID_LIMIT"),
    # get_metadata
    ("get_metadata", {}, "NO_DOCUMENTS"),
    ("get_metadata", {"record_refs": ["  "], "titles": [""]}, "NO_DOCUMENTS"),
    ("get_metadata", {"record_refs": ["r"] * 60, "titles": ["t"] * 41}, "BATCH_TOO_LARGE"),
    ("get_metadata", {"search_id": "s", "limit": 101}, "BATCH_TOO_LARGE"),
    ("get_metadata", {"search_id": "s", "limit": -1}, "INVALID_LIMIT"),
    ("get_metadata", {"search_id": "s", "offset": -1}, "INVALID_OFFSET"),
    ("get_metadata", {"search_id": "s", "scope": "top"}, "INVALID_SCOPE"),
    ("get_metadata", {"search_id": "s", "fields": ["abstract", "impact"]}, "INVALID_FIELDS"),
    ("get_metadata", {"search_id": "s", "fields": ["locator"]}, "INVALID_FIELDS"),
    # read_online_html
    ("read_online_html", {}, "INVALID_INPUT"),
    ("read_online_html", {"record_ref": "r", "title": "t"}, "INVALID_INPUT"),
    ("read_online_html", {"record_ref": "r", "offset": -1}, "INVALID_OFFSET"),
    ("read_online_html", {"record_ref": "r", "max_characters": 200_001}, "INVALID_LIMIT"),
    ("read_online_html", {"record_ref": "r", "max_characters": -5}, "INVALID_LIMIT"),
    ("read_online_html", {"record_ref": "r", "on_verification": "later"}, "INVALID_POLICY"),
    # download_paper
    ("download_paper", {}, "INVALID_INPUT"),
    ("download_paper", {"record_ref": "rec_1", "title": "t"}, "INVALID_INPUT"),
    ("download_paper", {"record_ref": "r", "format": "docx"}, "INVALID_FORMAT"),
    ("download_paper", {"record_ref": "r", "wait_seconds": 901}, "INVALID_WAIT"),
    ("download_paper", {"record_ref": "r", "wait_seconds": -1}, "INVALID_WAIT"),
    ("download_paper", {"record_ref": "r", "on_verification": "x"}, "INVALID_POLICY"),
    ("author_papers", {}, "INVALID_INPUT"),
    ("author_papers", {"author": "  "}, "INVALID_INPUT"),
    ("author_papers", {"author": "郑丽", "record_ref": "rec_a", "institution": "北江大学"}, "INVALID_INPUT"),
    ("author_papers", {"author": "郑丽", "limit": 101}, "INVALID_LIMIT"),
    ("author_papers", {"author": "郑丽", "offset": 151}, "INVALID_OFFSET"),
    ("author_papers", {"author": "郑丽", "on_verification": "x"}, "INVALID_POLICY"),
    ("journal_issues", {}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "法学评论", "issn": "1004-1303"}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "法学评论", "year": 2024}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "法学评论", "issue": "06"}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "法学评论", "year": 2201, "issue": "06"}, "INVALID_YEAR"),
    ("journal_issues", {"journal": "法学评论", "year": 2024, "issue": "06", "limit": 101}, "INVALID_LIMIT"),
    ("journal_issues", {"journal": "法学评论", "year": 2024, "issue": "06", "offset": -1}, "INVALID_OFFSET"),
    ("journal_issues", {"cn": "42-1090/D", "on_verification": "x"}, "INVALID_POLICY"),
    ("related_papers", {}, "INVALID_INPUT"),
    ("related_papers", {"record_ref": "r", "title": "t"}, "INVALID_INPUT"),
    ("related_papers", {"record_ref": "r", "relation": "cited_by"}, "INVALID_RELATION"),
    ("related_papers", {"record_ref": "r", "limit": 101}, "INVALID_LIMIT"),
    ("related_papers", {"record_ref": "r", "wait_seconds": 56}, "INVALID_WAIT"),
    ("related_papers", {"record_ref": "r", "on_verification": "x"}, "INVALID_POLICY"),
    ("search", {"query": "q", "options": {"expand": 21}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"expand": -1}}, "INVALID_OPTION"),
    ("structured_search", {"expression": {"field": "title", "value": "x"}, "options": {"expand": 3}}, "INVALID_OPTION"),
    ("expert_search", {"expression": "TI='x'", "options": {"expand": 3}}, "INVALID_OPTION"),
    # save_to_zotero
    ("save_to_zotero", {}, "NO_DOCUMENTS"),
    ("save_to_zotero", {"record_refs": ["r"] * 101}, "BATCH_TOO_LARGE"),
    ("save_to_zotero", {"search_id": "op_1", "scope": "all"}, "INVALID_SCOPE"),
    ("save_to_zotero", {"record_refs": ["r"], "tags": ["a,b"]}, "INVALID_TAGS"),
    ("save_to_zotero", {"record_refs": ["r"], "tags": ["x" * 101]}, "INVALID_TAGS"),
    ("save_to_zotero", {"record_refs": ["r"], "attach": "yes"}, "INVALID_INPUT"),
    ("read_online_html", {"record_ref": "r", "source": "disk"}, "INVALID_SOURCE"),
    # download_papers
    ("download_papers", {}, "NO_DOCUMENTS"),
    ("download_papers", {"record_refs": ["r"] * 201}, "BATCH_TOO_LARGE"),
    ("download_papers", {"search_id": "op_1", "interval_seconds": 4}, "INVALID_INTERVAL"),
    ("download_papers", {"search_id": "op_1", "limit": 201}, "INVALID_LIMIT"),
    # export_citations
    ("export_citations", {}, "NO_DOCUMENTS"),
    ("export_citations", {"titles": ["t"] * 101}, "BATCH_TOO_LARGE"),
    ("export_citations", {"search_id": "s", "scope": "everything"}, "INVALID_SCOPE"),
    ("export_citations", {"record_refs": ["r"], "format": "word"}, "INVALID_FORMAT"),
    # link_references
    ("link_references", {"text": "字" * 174_762 + "abc"}, "INPUT_TOO_LARGE"),
    # login
    ("login", {"remote_access_url": "http://vpn.example.edu.cn/"}, "INVALID_LOGIN_URL"),
    ("login", {"remote_access_url": "https://user:pw@vpn.example.edu.cn/"}, "INVALID_LOGIN_URL"),
    ("login", {"remote_access_url": "https:///nohost"}, "INVALID_LOGIN_URL"),
    ("login", {"remote_access_url": "vpn.example.edu.cn"}, "INVALID_LOGIN_URL"),
    # operation_control
    ("operation_control", {"action": "stop"}, "INVALID_ACTION"),
    ("operation_control", {"action": ""}, "INVALID_ACTION"),
    ("operation_control", {"action": "continue", "additional_requests": 5001}, "INVALID_OPTION"),
    ("operation_control", {"action": "continue", "additional_seconds": 7201}, "INVALID_OPTION"),
    # watch
    ("watch", {"action": "watch"}, "INVALID_ACTION"),
    ("watch", {"action": "run"}, "INVALID_INPUT"),
    ("watch", {"action": "add", "name": "图谱"}, "INVALID_INPUT"),
    ("watch", {"action": "add", "name": "图谱", "tool": "search_facets", "arguments": {"query": "x"}}, "INVALID_INPUT"),
]


@pytest.mark.parametrize(("tool", "raw", "code"), INVALID, ids=[f"{c}-{t}-{i}" for i, (t, _, c) in enumerate(INVALID)])
def test_invalid_input_gets_the_precise_code(tool: str, raw: Any, code: str) -> None:
    assert code_of(tool, raw) == code


def test_every_tool_has_a_rejection_case() -> None:
    assert set(REGISTRY) <= {t for t, _, _ in INVALID}


# --- order: the first failing rule wins ------------------------------------------------------------


ORDER: list[tuple[str, dict[str, Any], str]] = [
    ("search", {"query": "", "mode": "x", "limit": 500}, "INVALID_QUERY"),
    ("search", {"query": "q", "mode": "x", "limit": 500}, "INVALID_MODE"),
    ("search", {"query": "q", "limit": 500, "year_from": -1}, "INVALID_LIMIT"),
    ("search", {"query": "q", "year_from": -1, "options": {"on_verification": "x"}}, "INVALID_YEAR"),
    ("search", {"query": "q", "options": {"on_verification": "x", "sort": "x"}}, "INVALID_POLICY"),
    ("search", {"query": "q", "options": {"sort": "x", "max_pages": 0, "candidate_target": 9999}}, "INVALID_SORT"),
    ("search", {"query": "q", "options": {"max_pages": 9999, "metadata": "x"}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"metadata": "x", "freshness": "x"}}, "INVALID_METADATA"),
    ("search", {"query": "q", "options": {"freshness": "x"}, "concept_groups": [[]]}, "INVALID_FRESHNESS"),
    ("search", {"query": "q", "bogus": 1, "limit": 500}, "INVALID_INPUT"),
    ("search_results", {"search_id": "s", "scope": "x", "view": "x", "offset": -1}, "INVALID_SCOPE"),
    ("search_results", {"search_id": "s", "view": "x", "offset": -1}, "INVALID_VIEW"),
    ("search_results", {"search_id": "s", "offset": -1, "limit": 500}, "INVALID_OFFSET"),
    ("get_metadata", {"titles": ["t"] * 101, "scope": "x"}, "BATCH_TOO_LARGE"),
    ("download_paper", {"format": "x"}, "INVALID_INPUT"),
    # The old validators' order (surface/arguments.py before the tools became modules): a rule between fields
    # comes first (validate_first) or right after its field (AFTER), never after every field's own rule.
    ("related_papers", {"limit": 101}, "INVALID_INPUT"),
    ("related_papers", {"relation": "x", "wait_seconds": -1}, "INVALID_INPUT"),
    ("related_papers", {"record_ref": "r", "title": "t", "on_verification": "x"}, "INVALID_INPUT"),
    ("journal_issues", {"limit": 101}, "INVALID_INPUT"),
    ("journal_issues", {"year": -1, "on_verification": "x"}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "j", "year": -1, "issue": ""}, "INVALID_YEAR"),
    ("journal_issues", {"journal": "j", "issue": "1", "limit": 101}, "INVALID_INPUT"),
    ("author_papers", {"author": " ", "limit": 101}, "INVALID_INPUT"),
    ("author_papers", {"author": "张三", "record_ref": "r", "institution": "i", "offset": -1}, "INVALID_INPUT"),
    ("author_papers", {"author": "张三", "limit": 101, "offset": 151}, "INVALID_LIMIT"),
    ("author_papers", {"author": "张三", "offset": 151, "on_verification": "x"}, "INVALID_OFFSET"),
    ("search", {"query": "", "year_from": 2020, "year_to": 2010}, "INVALID_QUERY"),
    ("search", {"query": "q", "limit": 101, "year_from": 2020, "year_to": 2010}, "INVALID_LIMIT"),
    ("search", {"query": "q", "year_from": 2020, "year_to": 2010, "options": {"on_verification": "x"}}, "INVALID_YEAR"),
    ("search", {"query": "q", "options": {"timeout_seconds": 0, "expand": 21, "metadata": "x"}}, "INVALID_OPTION"),
    ("search", {"query": "q", "options": {"expand": -1, "freshness": "x"}}, "INVALID_OPTION"),
    ("search_facets", {"limit": 51}, "INVALID_INPUT"),
    ("search_facets", {"year_to": -1, "on_verification": "x"}, "INVALID_INPUT"),
    ("search_facets", {"search_id": "s", "year_from": -1}, "INVALID_INPUT"),
    ("search_facets", {"expression": EXPR, "year_from": 2020, "year_to": 2010, "facets": ["bogus"]}, "INVALID_YEAR"),
    ("search_facets", {"search_id": "s", "facets": ["bogus"], "limit": 51}, "INVALID_FACET"),
    ("search_facets", {"search_id": "s", "facets": ["bogus"], "freshness": "x"}, "INVALID_FACET"),
    ("structured_search", {"expression": EXPR, "limit": 101, "options": {"expand": 3}}, "INVALID_OPTION"),
    ("structured_search", {"expression": EXPR, "options": {"sort": "x", "expand": 3}}, "INVALID_OPTION"),
    ("structured_search", {"expression": EXPR, "year_from": 2020, "year_to": 2010, "sort": "x"}, "INVALID_YEAR"),
    ("expert_search", {"expression": "SU='x'", "year_to": -1, "options": {"expand": 3}}, "INVALID_OPTION"),
    ("expert_search", {"expression": "SU='x'", "options": {"metadata": "x", "expand": -1}}, "INVALID_OPTION"),
    ("check_references", {"style": "bibtex"}, "REFERENCES_REQUIRED"),
    ("check_references", {"on_verification": "x"}, "REFERENCES_REQUIRED"),
    ("check_references", {"references": ["t"] * 201, "style": "x"}, "TOO_MANY_ENTRIES"),
    ("export_citations", {"scope": "x"}, "NO_DOCUMENTS"),
    ("export_citations", {"offset": -1, "format": "x"}, "NO_DOCUMENTS"),
    ("export_citations", {"titles": ["t"] * 101, "format": "x"}, "BATCH_TOO_LARGE"),
    ("export_citations", {"titles": ["t"] * 101, "scope": "x"}, "BATCH_TOO_LARGE"),
    ("export_citations", {"titles": ["t"], "scope": "x", "format": "custom"}, "INVALID_SCOPE"),
    ("save_to_zotero", {"scope": "x"}, "NO_DOCUMENTS"),
    ("save_to_zotero", {"record_refs": ["r"] * 101, "scope": "x"}, "BATCH_TOO_LARGE"),
    ("save_to_zotero", {"search_id": "s", "scope": "x", "tags": ["a,b"]}, "INVALID_SCOPE"),
]


@pytest.mark.parametrize(("tool", "raw", "code"), ORDER, ids=[c for _, _, c in ORDER])
def test_first_failing_rule_wins(tool: str, raw: dict[str, Any], code: str) -> None:
    assert code_of(tool, raw) == code


def test_a_null_facet_filter_counts_as_not_given() -> None:
    """Intended change: the schema types each facet's list as nullable, so null is an empty list (it was
    INVALID_INPUT before the tools became modules)."""
    args = parse("structured_search", {"expression": EXPR, "facet_filters": {"fund": None, "year": ["YE=2024"]}})
    assert args.facet_filters.fund == [] and args.facet_filters.year == ["YE=2024"]


# --- messages: Chinese, naming the field --------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "raw", "field"),
    [
        ("search", {"query": "q", "limit": "10"}, "limit"),
        ("search", {"query": "q", "options": {"max_pages": "3"}}, "options.max_pages"),
        ("search", {"query": "q", "options": {"pagez": 3}}, "options.pagez"),
        ("search", {"query": "q", "extra": 3}, "extra"),
        ("get_metadata", {"titles": ["a", 2]}, "titles[1]"),
        ("link_references", {}, "text"),
        ("search", {"query": "q", "options": {"max_pages": 101}}, "options.max_pages"),
        ("search", {"query": "q", "concept_groups": [["a"], ["b", "x" * 81]]}, "concept_groups[1][1]"),
        ("download_paper", {"record_ref": "r", "wait_seconds": 901}, "wait_seconds"),
        ("read_online_html", {"record_ref": "r", "max_characters": 200_001}, "max_characters"),
    ],
)
def test_messages_are_chinese_and_name_the_field(tool: str, raw: dict[str, Any], field: str) -> None:
    with pytest.raises(CnkiError) as caught:
        parse(tool, raw)
    message = caught.value.message
    assert field in message
    assert any("\u4e00" <= ch <= "\u9fff" for ch in message)
    assert caught.value.details["field"] == field


def test_wrong_type_message_says_what_was_expected() -> None:
    with pytest.raises(CnkiError) as caught:
        parse("search", {"query": "q", "limit": "10"})
    assert "整数" in caught.value.message and "字符串" in caught.value.message


def test_unknown_top_level_field_lists_the_accepted_ones() -> None:
    with pytest.raises(CnkiError) as caught:
        parse("operation_status", {"id": "op_1"})
    assert "operation_id" in caught.value.message and "wait_seconds" in caught.value.message


def test_unknown_option_lists_the_accepted_options() -> None:
    with pytest.raises(CnkiError) as caught:
        parse("search", {"query": "q", "options": {"pages": 3}})
    assert "options.pages" in caught.value.message and "max_pages" in caught.value.message


def test_fields_selection_knows_the_public_paper_fields() -> None:
    assert {"abstract", "keywords", "doi", "quality", "authors", "record_ref"} <= METADATA_FIELDS
    assert "locator" not in METADATA_FIELDS


@pytest.mark.parametrize("blank", ["   ", "\u200b", "\x00", "\u202e \ufeff"])
def test_a_record_ref_with_nothing_visible_counts_as_absent(blank: str) -> None:
    args = parse("read_online_html", {"record_ref": blank, "title": " 再论违约金调整 "})

    assert args.record_ref == ""
    assert args.title == "再论违约金调整"


def test_blank_entries_of_document_lists_are_dropped() -> None:
    args = parse("get_metadata", {"record_refs": [" ", "rec_1", "\u200b"], "titles": ["\x00"]})

    assert args.record_refs == ["rec_1"]
    assert args.titles == []


@pytest.mark.parametrize("tool", ["get_metadata", "export_citations"])
def test_only_blank_documents_are_no_documents(tool: str) -> None:
    with pytest.raises(CnkiError) as caught:
        parse(tool, {"record_refs": ["  ", "\u200b"], "search_id": "\u2066"})

    assert caught.value.code == "NO_DOCUMENTS"


def test_a_query_with_nothing_visible_is_refused() -> None:
    with pytest.raises(CnkiError) as caught:
        parse("search", {"query": "\u200b\u200d"})

    assert caught.value.code == "INVALID_QUERY"


@pytest.mark.parametrize(
    ("raw", "received", "details"),
    [
        ({"text": "\n".join(f"[{i}] 论违约金{i}" for i in range(1, 5001))}, "text 中的条目超过 200 条",
         {"limit": 200}),
        ({"references": ["王利明. 论违约金[J]."] * 201}, "收到 201 条", {"limit": 200, "count": 201}),
    ],
    ids=["text", "references"],
)
def test_too_many_entries_says_the_limit_and_what_was_received(raw: dict[str, Any], received: str,
                                                                details: dict[str, int]) -> None:
    # A pasted list is read only to the entry past the limit, so its length is not claimed exactly.
    with pytest.raises(CnkiError) as caught:
        parse("check_references", raw)

    assert (caught.value.code, received in caught.value.message, caught.value.details) == (
        "TOO_MANY_ENTRIES", True, details
    )

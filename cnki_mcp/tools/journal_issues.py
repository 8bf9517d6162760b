"""journal_issues: a journal's years and issues on CNKI, or one issue's table of contents (期刊导航)."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, LIMIT_MAX, YEAR_MAX, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Limit, Offset, OnVerification, given

_YEAR_RULE = {"code": "INVALID_YEAR", "message": "{field} 须在 {ge}–{le} 之间（0 表示列出年份与刊期），收到的是 {value}。"}


class Args(ToolArgs):
    # The journal is named by exactly one of journal, issn, cn and record_ref (validate_first).
    journal: Annotated[str, Meta(description="期刊名称：知网的现刊名或曾用刊名（重名时改用 issn 或 cn）")] = ""
    issn: Annotated[str, Meta(description="期刊的 ISSN，如 1000-1234")] = ""
    cn: Annotated[str, Meta(description="期刊的国内统一刊号，如 11-1234/D")] = ""
    record_ref: Annotated[str, Meta(description="该刊一篇论文的 record_ref")] = ""
    year: Annotated[int, Meta(ge=0, le=YEAR_MAX, description="读哪一年的一期目录（与 issue 一起给出）；省略时列出年份与刊期", extra=_YEAR_RULE)] = 0
    issue: Annotated[int | str, Meta(description="配合 year：哪一期，如 4、\"04\"、\"No.4\"、\"第4期\"，或 years 中的 code")] = ""
    limit: Annotated[Limit, Meta(description=f"配合 year 和 issue：每页条数，1–{LIMIT_MAX}，默认 {LIMIT_DEFAULT}")] = LIMIT_DEFAULT
    offset: Annotated[Offset, Meta(description="配合 year 和 issue：从目录的第几篇开始（取上次返回的 next_offset）")] = 0
    on_verification: OnVerification = "ask"


TITLE = "期刊刊期与目录"
DESCRIPTION = (
    "一种期刊在知网的刊期与目录：用 journal（现刊名或曾用刊名）、issn、cn 或其中一篇论文的 record_ref 指明期刊（四者取一）。"
    "不带 year 时返回全部年份与各期（years，新的在前）；带 year 和 issue（4、\"04\"、\"第4期\" 或 years 中的 code）时返回这一期的"
    "目录 records（按刊内顺序，含栏目 section），用 limit/offset 分页。目录中的论文存入本地并带 record_ref。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=20, seconds=600)  # a search, the journal page, yearList pages, one issue


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """One way of naming the journal, before any other rule (all trimmed in place)."""
    args.journal, args.issn, args.cn, args.record_ref = map(given, (args.journal, args.issn, args.cn, args.record_ref))
    named = [field for field, value in (("journal", args.journal), ("issn", args.issn), ("cn", args.cn),
                                        ("record_ref", args.record_ref)) if value]
    if len(named) != 1:
        why = f"只能提供其中一个，收到了 {'、'.join(named)}" if named else "须提供其中一个"
        raise CnkiError("INVALID_INPUT", f"journal、issn、cn 与 record_ref {why}。", details={"field": "journal"})


def _issue_with_year(args: Any, raw: dict[str, Any]) -> None:
    """Year and issue together or neither (issue as text, trimmed in place), right after the year's range."""
    args.issue = given(str(args.issue))
    if bool(args.year) != bool(args.issue):
        raise CnkiError("INVALID_INPUT", "year 与 issue 须一起提供（读一期的目录），或都不提供（列出年份与刊期）。", details={"field": "issue"})


AFTER = {"issue": _issue_with_year}
Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.research.journal_issues import KIND, IssuesAsked, JournalIssues

    asked = IssuesAsked(journal=args.journal, issn=args.issn, cn=args.cn, record_ref=args.record_ref,
                        year=args.year or None, issue=str(args.issue), limit=args.limit, offset=args.offset)
    issues = JournalIssues(await deps.catalog(), deps.site())
    jobs = await deps.jobs()
    job = jobs.start(KIND, BUDGET.of(args.on_verification), functools.partial(issues.run, asked=asked))
    return await jobs.inline(job, call)

"""journal_issues: a journal's years and issues on CNKI, or one issue's table of contents (期刊导航)."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, YEAR_MAX, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Limit, Offset, OnVerification, given

_YEAR_RULE = {"code": "INVALID_YEAR", "message": "{field} 须在 {ge}–{le} 之间（0 表示列出年份与刊期），收到的是 {value}。"}


class Args(ToolArgs):
    # The journal is named by exactly one of journal, issn, cn and record_ref (validate_first).
    journal: Annotated[str, Meta(description="现刊名或曾用刊名")] = ""
    issn: str = ""
    cn: Annotated[str, Meta(description="统一刊号，如 11-1234/D")] = ""
    record_ref: Annotated[str, Meta(description="该刊一篇论文")] = ""
    year: Annotated[int, Meta(ge=0, le=YEAR_MAX, description="与 issue 一起给出", extra=_YEAR_RULE)] = 0
    issue: Annotated[int | str, Meta(description="如 4 或 years 中的 code")] = ""
    limit: Limit = LIMIT_DEFAULT
    offset: Offset = 0
    on_verification: OnVerification = "ask"


TITLE = "期刊刊期与目录"
DESCRIPTION = (
    "期刊的刊期与目录：用 journal、issn、cn 或一篇论文的 record_ref 指明；不带 year 时列出各期，带 year 和 issue 时返回目录。"
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
    job = jobs.start(KIND, BUDGET.of(args.on_verification), functools.partial(issues.run, asked=asked), a_list=True)
    return await jobs.inline(job, call)

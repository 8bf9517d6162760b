"""author_papers: an author's other papers on CNKI (newest first): from the author's own page when a paper
of theirs links it, else a listing of 作者 AND 作者单位."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Limit, Offset, OnVerification, given

AUTHOR_CHARS_MAX = 60
AUTHOR_OFFSET_MAX = 150  # listing pages read at most hold 200 rows


class Args(ToolArgs):
    # author, record_ref and institution are trimmed before their rules: those live in validate_first.
    author: str
    record_ref: Annotated[str, Meta(description="该作者一篇论文")] = ""
    institution: str = ""
    limit: Limit = LIMIT_DEFAULT
    offset: Annotated[Offset, Meta(description=f"至多 {AUTHOR_OFFSET_MAX}")] = 0
    on_verification: OnVerification = "ask"


TITLE = "作者的论文"
DESCRIPTION = (
    "一位作者的论文（从新到旧）：author 加其一篇论文的 record_ref 最准，或加 institution；只给姓名时可能混入同名者。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=20, seconds=600)  # the paper's page, the author page, listing pages, a few detail pages


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """The name and the one way of telling namesakes apart, before the page's rules (all trimmed in place)."""
    args.author, args.record_ref, args.institution = map(given, (args.author, args.record_ref, args.institution))
    if not 1 <= len(args.author) <= AUTHOR_CHARS_MAX:
        raise CnkiError("INVALID_INPUT", f"author 须为 1–{AUTHOR_CHARS_MAX} 字的作者姓名。", details={"field": "author"})
    if args.record_ref and args.institution:
        raise CnkiError("INVALID_INPUT", "record_ref 与 institution 只能提供其一：record_ref 的详情页已给出作者单位。",
                        details={"field": "institution"})
    if len(args.institution) > AUTHOR_CHARS_MAX * 2:
        raise CnkiError("INVALID_INPUT", f"institution 最多 {AUTHOR_CHARS_MAX * 2} 字。", details={"field": "institution"})


def _offset_reached(args: Any, raw: dict[str, Any]) -> None:
    """How far the listing pages reach, right after the offset's own rule."""
    if args.offset > AUTHOR_OFFSET_MAX:
        raise CnkiError("INVALID_OFFSET", f"offset 最多 {AUTHOR_OFFSET_MAX}，收到的是 {args.offset}。", details={"field": "offset"})


AFTER = {"offset": _offset_reached}
Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.research.author_papers import KIND, AuthorAsked, AuthorPapers

    asked = AuthorAsked(author=args.author, record_ref=args.record_ref, institution=args.institution,
                        limit=args.limit, offset=args.offset)
    authors = AuthorPapers(await deps.catalog(), deps.site())
    jobs = await deps.jobs()
    job = jobs.start(KIND, BUDGET.of(args.on_verification), functools.partial(authors.run, asked=asked), a_list=True)
    return await jobs.inline(job, call)

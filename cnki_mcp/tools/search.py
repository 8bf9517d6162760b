"""search: a research question planned into concepts, searched on several fields, ranked and selected."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, PLAN_GROUPS_MAX, PLAN_TERMS_MAX, ToolArgs
from cnki_mcp.tools._fields import Limit, YearFrom, YearTo, years_in_order
from cnki_mcp.tools._searching import SearchOptions, check_source_categories, start_search

if TYPE_CHECKING:
    from cnki_mcp.research.query import ConceptQuery

QUERY_MAX = 1000
Mode = Literal["precise", "balanced", "broad"]
MODES: tuple[str, ...] = get_args(Mode)


class Args(ToolArgs):
    query: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=QUERY_MAX,
            extra={"code": "INVALID_QUERY", "trim": True, "message": "{field} 须为 {ge}–{le} 字，收到 {size} 字。"},
        ),
    ]
    mode: Annotated[
        Mode,
        Meta(description="precise 不补充检索；broad 同 balanced", extra={"code": "INVALID_MODE", "empty_means_default": True}),
    ] = "balanced"
    limit: Annotated[Limit, Meta(description="返回条数，不影响检索范围")] = LIMIT_DEFAULT
    year_from: YearFrom = 0
    year_to: YearTo = 0
    concept_groups: Annotated[
        list[list[str]],
        Meta(
            description=f"必要概念：组间 AND，组内同义词 OR；至多 {PLAN_GROUPS_MAX}×{PLAN_TERMS_MAX}"
        ),
    ] = []  # empty = plan automatically (checked by validate, after the options)
    options: SearchOptions = msgspec.field(default_factory=SearchOptions)
    source_categories: list[str] = []

    def asked(self) -> ConceptQuery:
        """The question as the search reads it."""
        from cnki_mcp.research.query import ConceptQuery

        return ConceptQuery(text=self.query, groups=self.concept_groups)


TITLE = "研究检索"
DESCRIPTION = (
    "研究检索：给出研究问题，自动规划概念、检索并按相关性与来源质量筛选；条件明确时用 structured_search。"
)
READ_ONLY = True
OPEN_WORLD = True


AFTER = {"year_to": years_in_order}


def validate(args: Args, raw: dict[str, Any]) -> None:
    """The caller's concept groups (INVALID_PLAN), the source categories."""
    check_source_categories(args, raw)
    if args.concept_groups:
        from cnki_mcp.research.query import validate_plan  # the rules' home: loaded with the first search

        args.concept_groups = validate_plan(args.concept_groups)


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.research.pipeline import SearchSettings, search_input

    query = args.asked()
    request = search_input(
        query, mode=args.mode, limit=args.limit, year_from=args.year_from, year_to=args.year_to,
        options=SearchSettings.of(args.options), source_categories=args.source_categories,
    )
    return await start_search(deps, request, query, call)

"""watch: topic watches over search, structured_search and expert_search — add, list, remove, and run
(the search read newest first, answering only the papers published since the last run; research/watch.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import LIMIT_MAX, OPTION_RANGES, ToolArgs
from cnki_mcp.core.watch_model import Watch, WatchList, WatchView

if TYPE_CHECKING:
    from cnki_mcp.ops.jobs import Job
    from cnki_mcp.research.pipeline import SearchInput
    from cnki_mcp.research.query import Query
    from cnki_mcp.tools._searching import NativeSearchArgs

KIND = "watch"  # the operation of a run
NAME_MAX = 40
Action = Literal["add", "list", "run", "remove"]
Tool = Literal["search", "structured_search", "expert_search"]


class Args(ToolArgs):
    action: Annotated[Action, Meta(extra={"code": "INVALID_ACTION"})]
    name: Annotated[str, Meta(max_length=NAME_MAX, description="关注的名称", extra={"trim": True})] = ""
    tool: Annotated[Tool, Meta(extra={"empty_means_default": True})] = "search"
    arguments: Annotated[dict[str, Any], Meta(description="add：该检索工具的参数；run：只可给 options")] = {}


TITLE = "关注主题"
DESCRIPTION = (
    "关注一个检索（含年份与筛选）：run 按时间从新到旧读到已知论文为止，只返回新论文；首次 run 建立基线。"
)
READ_ONLY = False
OPEN_WORLD = True


def validate(args: Args, raw: dict[str, Any]) -> None:
    """A name for every action but list; arguments only with add."""
    if args.action != "list" and not args.name:
        raise CnkiError("INVALID_INPUT", f"{args.action} 需要 name。", details={"field": "name"})
    if args.action == "add" and not args.arguments:
        raise CnkiError("INVALID_INPUT", "add 需要 arguments：所关注检索的参数。", details={"field": "arguments"})
    if args.action == "run" and (set(args.arguments) - {"options"} or not isinstance(args.arguments.get("options", {}), dict)):
        raise CnkiError("INVALID_INPUT", "run 的 arguments 只可含 options（如 {\"options\": {\"max_pages\": 10}}）；其余参数在 add 时已定。",
                        details={"field": "arguments"})


Result = OperationView | WatchList


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    store = await deps.store()
    watches = store.data.watches
    if args.action == "add":
        if args.name in watches:
            raise CnkiError("WATCH_EXISTS", details={"name": args.name})
        watches[args.name] = await _checked(Watch(name=args.name, tool=args.tool, arguments=args.arguments, created_at=utc_now_iso()), call)
    elif args.action == "remove":
        if watches.pop(args.name, None) is None:
            raise CnkiError("WATCH_NOT_FOUND", details={"name": args.name})
    elif args.action == "run":
        jobs = await deps.jobs()
        watch = stored_watch(watches, args.name)
        if args.arguments:  # new options for this run on, checked by the watched tool's rules when it starts
            watch.arguments = {**watch.arguments, "options": {**watch.arguments.get("options", {}), **args.arguments["options"]}}
        return await jobs.inline(await start_watch(deps, watch, call), call)
    return WatchList(watches=[WatchView.of(watch) for watch in watches.values()])


def stored_watch(watches: Any, name: str) -> Watch:
    watch: Watch | None = watches.get(name)
    if watch is None:
        raise CnkiError("WATCH_NOT_FOUND", details={"name": name})
    return watch


async def _checked(watch: Watch, call: ToolCall | None) -> Watch:
    """The watch with its arguments checked by its tool's own rules; a concept search's plan is fixed into
    ``concept_groups`` so that every run asks CNKI the same listings."""
    from cnki_mcp.research.pipeline import plan_search

    _, query = _search_of(watch)
    if watch.tool == "search" and not watch.arguments.get("concept_groups"):
        plan = await plan_search(query, call)
        watch.arguments = {**watch.arguments, "concept_groups": plan.concepts}
        _search_of(watch)  # the fixed plan passes the tool's rules too
    return watch


def _search_of(watch: Watch) -> tuple[Any, Query]:
    """The watched tool's arguments parsed by its rules, and what they ask."""
    from cnki_mcp.tools import REGISTRY, parse_arguments

    args: Any = parse_arguments(REGISTRY[watch.tool], watch.arguments)
    return args, args.asked()


def watch_request(args: Any, query: Query, watch: Watch) -> SearchInput:
    """The search a run makes: newest first, live, no expansion, the candidate target out of the way (the
    known papers end a listing); a first run reads one page of each listing with list data only, a later
    one reads the details of the papers it did not know."""
    from cnki_mcp.research.pipeline import SearchSettings, search_input
    from cnki_mcp.tools._searching import NativeSearchArgs

    baseline = not watch.baseline_at
    options = msgspec.structs.replace(
        SearchSettings.of(args.options), sort="date_desc", freshness="live", expand=0,
        metadata="basic" if baseline else "all", candidate_target=OPTION_RANGES["candidate_target"][1],
        max_pages=1 if baseline else args.options.max_pages,
    )
    native: NativeSearchArgs | None = args if isinstance(args, NativeSearchArgs) else None
    request = search_input(
        query, limit=LIMIT_MAX, year_from=args.year_from, year_to=args.year_to, options=options,
        facet_filters=native.facet_filters.picked() if native is not None else None, source_categories=args.source_categories,
    )
    request.seen = list(watch.known)
    return request


async def start_watch(deps: AppCore, watch: Watch, call: ToolCall | None) -> Job:
    """A run of ``watch`` as an operation (pacing, the daily budget and the person's hand-off are a search's)."""
    from cnki_mcp.ops.jobs import OperationContext
    from cnki_mcp.research.pipeline import SearchState, plan_search, search_budget
    from cnki_mcp.research.watch import run_watch

    args, query = _search_of(watch)
    request = watch_request(args, query, watch)
    plan = await plan_search(query, call)
    state = SearchState(search_id="", input=request, plan=plan, query=query)  # no cache key: never reused

    async def work(op: OperationContext) -> Any:
        state.search_id = op.operation_id
        return await run_watch(op, await deps.enrichment(), await deps.store(), watch, state)

    jobs = await deps.jobs()
    running = deps.watch_runs.get(watch.name)
    if running is not None and jobs.live(running) is not None:  # both would tell the same papers and remember them
        raise CnkiError("WATCH_RUNNING", details={"name": watch.name, "operation_id": running})
    job = jobs.start(KIND, search_budget(request), work)
    deps.watch_runs[watch.name] = job.record.operation_id
    return job

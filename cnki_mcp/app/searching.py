"""The searches and a field's shape (facets)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cnki_mcp.app.core import AppCore, Reply, stored_search
from cnki_mcp.core import tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import Plan, SearchSummary
from cnki_mcp.ops.jobs import OperationContext, Work, kind_budget

# For types only: a handler imports what it works with when first called (see core.py).
if TYPE_CHECKING:
    from cnki_mcp.research.pipeline import SearchInput, SearchState
    from cnki_mcp.research.query import Query


class SearchTools(AppCore):
    """The searches: search, structured_search, expert_search, search_facets."""

    async def search(self, args: tool_args.SearchArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research.pipeline import plan_search, search_input
        from cnki_mcp.research.query import query_of

        query = query_of(args)
        return await self._start_search(search_input(args), await plan_search(query, ctx), ctx, query)

    async def structured_search(self, args: tool_args.StructuredSearchArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research.pipeline import plan_search, search_input
        from cnki_mcp.research.query import query_of

        query = query_of(args)  # read and compiled once: a bad tree is reported before anything else
        return await self._start_search(search_input(args), await plan_search(query, ctx), ctx, query)

    async def expert_search(self, args: tool_args.ExpertSearchArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research.pipeline import plan_search, search_input
        from cnki_mcp.research.query import query_of

        query = query_of(args)  # read once: a bad expression is reported before anything else
        return await self._start_search(search_input(args), await plan_search(query, ctx), ctx, query)

    async def _start_search(self, request: SearchInput, plan: Plan, ctx: ToolCall | None, query: Query) -> Reply:
        """A search after validation and planning: the prefer_cache answer, or a new operation."""
        from cnki_mcp.research.pipeline import SearchState, cache_key, cached_reply, search_budget

        store = await self.store()
        key = cache_key(request, plan)
        if request.options.freshness == "prefer_cache":
            hit = cached_reply(store, key, request.limit)
            if hit is not None:
                return hit
        state = SearchState(search_id="", input=request, plan=plan, cache_key=key, query=query)
        jobs = await self.jobs()
        return await jobs.inline(jobs.start("search", search_budget(request), self._search_work(state)), ctx)

    def _search_work(self, fresh: SearchState | None) -> Work:
        """The operation body of a search: ``fresh`` for a new one, None to resume from the checkpoint."""

        async def work(op: OperationContext) -> SearchSummary:
            from cnki_mcp.research.pipeline import run_search

            relations = await self.relations()
            return await run_search(op, relations.engine, fresh, relations)

        return work

    async def search_facets(self, args: tool_args.SearchFacetsArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research import facets

        store = await self.store()
        request = facets.facets_request(args, stored_search(store, args.search_id) if args.search_id else None)
        hit = await facets.cached_reply(store, request)
        if hit is not None:
            return hit
        work = functools.partial(facets.run, site=self.site(), store=store, request=request)
        jobs = await self.jobs()
        return await jobs.inline(jobs.start(facets.KIND, kind_budget(facets.KIND, args.on_verification), work), ctx)

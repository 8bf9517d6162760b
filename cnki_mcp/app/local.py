"""The tools that answer from this process and its store."""

from __future__ import annotations

from typing import Any

from cnki_mcp.app.core import AppCore, Reply, stored_refs
from cnki_mcp.core import tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, public_paper
from cnki_mcp.ops.jobs import OperationContext, kind_budget


class LocalTools(AppCore):
    """The tools that answer from this process and its store: records (the others are modules of ``cnki_mcp.tools``)."""

    async def get_metadata(self, args: tool_args.GetMetadataArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        if not args.local_only:
            refs = list(args.record_refs)
            if args.search_id:
                refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
            quality = args.quality or "quality" in args.fields

            async def work(op: OperationContext) -> dict[str, Any]:
                engine = await self.enrichment()
                return await engine.metadata(op, refs, args.titles, quality=quality, refresh=args.refresh, fields=args.fields)

            jobs = await self.jobs()
            return await jobs.inline(jobs.start("metadata", kind_budget("metadata"), work), ctx)
        from cnki_mcp.research.enrich import select_fields

        refs, problems = (await self.catalog()).resolve_local(args.record_refs or [], args.titles or [])
        if args.search_id:
            refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
        records = []
        seen: set[str] = set()
        for ref in refs:
            paper = store.data.papers.get(ref)
            if paper is None or ref in seen:
                continue
            seen.add(ref)
            records.append(select_fields(public_paper(paper), args.fields))
        found: dict[str, Any] = {"records": records}
        if problems:
            found["errors"] = problems
        return LocalReply(source="local", result=found)

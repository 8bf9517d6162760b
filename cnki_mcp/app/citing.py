"""References and citations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from cnki_mcp.app.core import AppCore, Reply
from cnki_mcp.core import tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import OperationContext, kind_budget

# For types only: a handler imports what it works with when first called (see core.py).
if TYPE_CHECKING:
    pass


class ReferenceTools(AppCore):
    """References and citations: link_references."""

    async def link_references(self, args: tool_args.LinkReferencesArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.references.links import Match, find_spans, render

        spans = find_spans(args.text)
        if len(spans) > tool_args.REFERENCES_MAX:
            raise CnkiError("TOO_MANY_REFERENCES", f"文本中有 {len(spans)} 个《题名》，一次最多处理 {tool_args.REFERENCES_MAX} 个。")
        store = await self.store()
        catalog = await self.catalog()

        def lookup(title: str) -> list[Match]:
            return [Match(record_ref=ref, url=store.data.papers[ref].url) for ref in catalog.by_title(title)]

        def linked() -> dict[str, Any]:
            text, references = render(args.text, spans, lookup)
            return {"status": "completed", "text": text, "references": msgspec.to_builtins(references)}

        missing = [span.title for span in spans if not lookup(span.title)]
        if not (args.lookup_missing and missing):
            return linked()

        async def work(op: OperationContext) -> dict[str, Any]:
            op.stage("locate")
            _, problems = await (await self.enrichment()).resolve_titles(op, missing)
            for problem in problems:
                op.add_error(problem)
            return linked()

        jobs = await self.jobs()
        return await jobs.inline(jobs.start("links", kind_budget("links"), work), ctx)

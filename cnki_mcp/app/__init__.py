"""The tool handlers: ``App``, the composition root of one server process (``core.AppCore``: the store, the
catalogue, the browser and the ``Site``, the jobs, the in-memory caches) with one mixin of handlers per area of
tools (``local``, ``searching``, ``papers``, ``citing``) and the one that spans areas (``operation_control`` goes on
with a search or a batch). ``surface/tools.py`` registers each handler as ``App.<tool>``. A handler imports the
lower layers it works with when first called, so answering ``initialize`` and ``tools/list`` loads none of them.

May import: fieldcheck, references, documents, research, ops, site, pages, store, core.
"""

from __future__ import annotations

from cnki_mcp.app.citing import ReferenceTools
from cnki_mcp.app.core import Reply
from cnki_mcp.app.local import LocalTools
from cnki_mcp.app.papers import PaperTools
from cnki_mcp.app.searching import SearchTools
from cnki_mcp.core import tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import CONTINUABLE

__all__ = ["App", "Reply"]


class App(LocalTools, SearchTools, PaperTools, ReferenceTools):
    """Every tool handler of one server process, over the state it shares (``AppCore``)."""

    async def operation_control(self, args: tool_args.OperationControlArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        if args.action == "cancel":
            return await jobs.cancel(args.operation_id)
        if args.action == "resume":
            return await jobs.resume(args.operation_id)
        if args.action == "continue":
            from cnki_mcp.documents import batch

            if not args.operation_id:
                raise CnkiError("INVALID_INPUT", "continue 需要 operation_id。")
            prior, budget = jobs.continuation(args.operation_id, args.additional_requests, args.additional_seconds, CONTINUABLE | {batch.KIND})
            if prior.kind == batch.KIND:
                return await self._start_batch(None, budget, ctx, prior)
            return await jobs.inline(jobs.start("search", budget, self._search_work(None), resume_from=prior), ctx)
        if args.action == "show":
            if self._site is None:
                raise CnkiError("VERIFICATION_NOT_FOUND")
            return await self._site.person.show(args.operation_id or None)
        if self._site is not None:
            await self._site.recover()
        return {"status": "completed", "message": "浏览器将在下一次需要访问知网时重新启动；登录状态保存在浏览器配置中，不受影响。"}


"""session_status: the personal or institutional login last recognised, or recognised again."""

from __future__ import annotations

from typing import Any

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import OperationView, SessionState
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import Budget


class Args(ToolArgs):
    refresh: bool = False


TITLE = "登录状态"
DESCRIPTION = (
    "已识别的登录身份；默认用上次的结果，不访问知网。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=10, seconds=60)


Result = OperationView | dict[str, Any]


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.site.session import advised

    if not args.refresh:
        from cnki_mcp.site.remote import configured_site
        from cnki_mcp.site.session import session_view

        # The sessions met so far, without starting them (nor the browser) to answer.
        if deps._sessions is not None:
            return advised(deps._sessions.cached())
        return advised(session_view(SessionState(), cached=True, route=deps.config.route, site=configured_site(deps.config)))
    from cnki_mcp.ops.jobs import OperationContext
    from cnki_mcp.research.backend import followed

    jobs = await deps.jobs()
    sessions = deps.sessions()

    async def work(op: OperationContext) -> dict[str, Any]:
        return advised(await followed(op, sessions.refresh(op)))

    return await jobs.inline(jobs.start("session", BUDGET.of(), work), call)

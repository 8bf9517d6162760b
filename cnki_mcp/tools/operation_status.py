"""operation_status: an operation's progress and result, waiting a while for it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from cnki_mcp.app.core import AppCore, progress_of
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import STATUS_WAIT_MAX, ToolArgs
from cnki_mcp.tools._fields import OperationId

_WAIT = f"至多等待的秒数，0–{STATUS_WAIT_MAX}"


class Args(ToolArgs):
    operation_id: OperationId = ""
    # Clamped, not refused (the specification's choice): a client asking for a longer wait gets the longest.
    wait_seconds: Annotated[int, Meta(ge=0, le=STATUS_WAIT_MAX, description=_WAIT, extra={"clamp": "both"})] = 0


TITLE = "任务进度"
DESCRIPTION = (
    f"后台任务的进度与结果；running 时用 wait_seconds={STATUS_WAIT_MAX} 等待。"
)
READ_ONLY = True
OPEN_WORLD = False


Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    jobs = await deps.jobs()
    return await jobs.status(args.operation_id, args.wait_seconds, progress_of(call), call)

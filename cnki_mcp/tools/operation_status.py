"""operation_status: an operation's progress and result, waiting a while for it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from cnki_mcp.app.core import AppCore, progress_of
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import STATUS_WAIT_MAX, ToolArgs

_WAIT = f"最多等待的秒数，0–{STATUS_WAIT_MAX}（超出按边界处理）；完成或需要人工操作时提前返回"


class Args(ToolArgs):
    operation_id: Annotated[str, Meta(description="任务编号；省略时返回唯一在运行的任务（有多个时须指定），没有任务时返回 idle")] = ""
    # Clamped, not refused (the specification's choice): a client asking for a longer wait gets the longest.
    wait_seconds: Annotated[int, Meta(ge=0, le=STATUS_WAIT_MAX, description=_WAIT, extra={"clamp": "both"})] = 0


TITLE = "任务进度"
DESCRIPTION = (
    f"查看后台任务的进度与结果。其他工具返回 operation_id 且状态为 running 时，用 wait_seconds={STATUS_WAIT_MAX} 继续等待；"
    "任务完成或需要用户在浏览器中操作时会提前返回。"
)
READ_ONLY = True
OPEN_WORLD = False


Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    jobs = await deps.jobs()
    return await jobs.status(args.operation_id, args.wait_seconds, progress_of(call), call)

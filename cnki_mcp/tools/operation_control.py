"""operation_control: cancel, continue, resume, show or recover an operation (or the browser)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from cnki_mcp.app import App
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import OPTION_RANGES, ToolArgs
from cnki_mcp.tools._fields import OperationId
from cnki_mcp.tools._searching import search_work

Action = Literal["cancel", "continue", "resume", "show", "recover"]
REQUESTS_MAX = OPTION_RANGES["max_requests"][1]
SECONDS_MAX = OPTION_RANGES["timeout_seconds"][1]
# A negative addition counts as none (the specification's choice); only the maximum is refused.
_ADDITION = {"code": "INVALID_OPTION", "clamp": "low"}


class Args(ToolArgs):
    action: Annotated[
        Action,
        Meta(extra={"code": "INVALID_ACTION"}),  # each action is described in DESCRIPTION
    ]
    operation_id: OperationId = ""
    additional_requests: Annotated[
        int,
        Meta(
            ge=0, le=REQUESTS_MAX, description=f"至多 {REQUESTS_MAX}", extra=_ADDITION
        ),
    ] = 0
    additional_seconds: Annotated[
        int,
        Meta(
            ge=0, le=SECONDS_MAX, description=f"至多 {SECONDS_MAX}", extra=_ADDITION
        ),
    ] = 0


TITLE = "管理后台任务"
DESCRIPTION = (
    "管理后台任务：cancel 取消；continue 接着跑中断或预算用完的任务；resume 人工步骤已完成；show 窗口放到前台；"
    "recover 在 BROWSER_UNAVAILABLE 后重连浏览器。"
)
READ_ONLY = False
OPEN_WORLD = True


class Done(msgspec.Struct, omit_defaults=True):
    """An action that is no operation: show (``shown``) and recover (``completed``, with what happens next)."""

    status: str
    message: str = ""


Result = OperationView | Done


async def run(deps: App, args: Args, call: ToolCall | None) -> Result:
    jobs = await deps.jobs()
    if args.action == "cancel":
        return await jobs.cancel(args.operation_id)
    if args.action == "resume":
        return await jobs.resume(args.operation_id)
    if args.action == "continue":
        from cnki_mcp.documents import batch
        from cnki_mcp.ops.jobs import CONTINUABLE
        from cnki_mcp.tools._batch import start_batch

        if not args.operation_id:
            raise CnkiError("INVALID_INPUT", "continue 需要 operation_id。")
        prior, budget = jobs.continuation(args.operation_id, args.additional_requests, args.additional_seconds, CONTINUABLE | {batch.KIND})
        if prior.kind == batch.KIND:
            return await start_batch(deps, None, budget, call, prior)
        return await jobs.inline(jobs.start("search", budget, search_work(deps, None), resume_from=prior), call)
    if args.action == "show":
        if deps._site is None:
            raise CnkiError("VERIFICATION_NOT_FOUND")
        return Done(**await deps._site.person.show(args.operation_id or None))
    if deps._site is not None:
        await deps._site.recover()
    return Done("completed", "浏览器将在下一次需要访问知网时重新启动；登录状态保存在浏览器配置中，不受影响。")

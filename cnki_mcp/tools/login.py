"""login: the person signs in to CNKI in the dedicated browser window, or sets the remote access route."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import Budget


class Args(ToolArgs):
    remote_access_url: Annotated[
        str,
        Meta(
            description="校外入口：学校 VPN 中的知网网址、VPN 或 CARSI 登录网址"
        ),
    ] = ""
    force: Annotated[bool, Meta(description="已登录也打开；不带网址时恢复直接访问")] = False


TITLE = "登录知网"
DESCRIPTION = (
    "打开知网登录窗口，由用户本人登录；账号密码不经过 MCP，不要向用户索要。"
)
READ_ONLY = False
OPEN_WORLD = True
BUDGET = Budget(requests=20, seconds=1800)


def validate(args: Args, raw: dict[str, Any]) -> None:
    """remote_access_url read by the route's rules (INVALID_LOGIN_URL, REMOTE_ACCESS_UNSUPPORTED)."""
    args.remote_access_url = args.remote_access_url.strip()
    if args.remote_access_url:
        from cnki_mcp.site.route import recognise  # its rules (and the AES for WebVPN) load with the first login

        recognise(args.remote_access_url)


Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.ops.jobs import OperationContext
    from cnki_mcp.research.backend import followed

    jobs = await deps.jobs()
    sessions = deps.sessions()

    async def work(op: OperationContext) -> dict[str, Any]:
        return await followed(op, sessions.login(op, args.remote_access_url, args.force))

    return await jobs.inline(jobs.start("login", BUDGET.of(), work), call)

"""The person, asked in the client: a search meets the simulator's captcha and a client with form elicitation is
asked in Chinese (完成了 / 放弃), in both eras (2026-07-28: ``input_required`` and a retry; 2025: an
``elicitation/create`` request), on the owner and through a second server that joined it. One person finishes
the challenge and answers 完成了: the search completes. Another declines: the search is cancelled. A login wall
is asked about the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult

from tests.harness import McpSession, serve_params
from tests.kns.server import KnsSimulator
from tests.test_e2e_recovery import expression, listed

pytestmark = [pytest.mark.browser]

ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


class Person:
    """The person at the client: finishes the challenge in the browser (the simulator's own way) and answers
    完成了, or declines; ``asked`` keeps the questions of each kind of answer."""

    def __init__(self, finish: Callable[[], None], action: Literal["accept", "decline"] = "accept") -> None:
        self.finish = finish
        self.action = action
        self.asked: dict[str, list[ElicitRequestParams]] = {"accept": [], "decline": []}

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked[self.action].append(params)
        if self.action == "decline":
            return ElicitResult(action="decline")
        self.finish()
        return ElicitResult(action="accept", content={"choice": "完成了"})


async def search(mcp: McpSession, topic: str) -> dict[str, Any]:
    return await mcp.call("structured_search", {
        "expression": expression(topic), "limit": 50, "options": {"freshness": "live", "metadata": "all"},
    })


def asked_well(questions: list[ElicitRequestParams]) -> None:
    """Each question: the browser window named, the one choice 完成了 / 放弃, nothing typed (no password)."""
    assert questions
    for params in questions:
        assert isinstance(params, ElicitRequestFormParams)
        assert "浏览器窗口" in params.message and "完成了" in params.message
        assert list(params.requested_schema["properties"]) == ["choice"]
        assert params.requested_schema["properties"]["choice"]["enum"] == ["完成了", "放弃"]
        assert "密码" not in params.message and "password" not in str(params.requested_schema).lower()


@pytest.mark.parametrize("joined", [False, True], ids=["direct", "joined"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_person_is_asked_in_the_client(kns: KnsSimulator, tmp_path: Path, mode: str, joined: bool) -> None:
    data = tmp_path / "data"
    params = serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="2")
    person = Person(kns.solve)
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with contextlib.AsyncExitStack() as stack:
            if joined:
                owner = await stack.enter_async_context(McpSession.serving(params, errlog=errlog))
                owner_pid = (await owner.call("diagnostics", {}))["owner_pid"]
            client = Client(stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=person)  # type: ignore[arg-type]
            mcp = McpSession(await stack.enter_async_context(client), data)
            assert client.session.protocol_version == ERAS[mode]
            diagnostics = await mcp.call("diagnostics", {})
            assert (diagnostics["owner_pid"] == owner_pid) if joined else (diagnostics["owner_pid"] == diagnostics["process_id"])

            papers = listed(kns, "检索增强")
            kns.captcha("detail", after=3)
            done = await mcp.wait(await search(mcp, "检索增强"))
            assert done["status"] == "completed", done
            assert done["result"]["enhanced_count"] == len(papers)
            asked_well(person.asked["accept"])
            assert kns.solves >= 1

            person.action = "decline"
            kns.captcha("detail", after=1)
            ended = await mcp.wait(await search(mcp, "大语言模型"))
            assert ended["status"] == "cancelled", ended
            asked_well(person.asked["decline"])
            assert kns.challenge_pending  # nobody solved it: the person abandoned


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_login_wall_is_asked_about_too(kns: KnsSimulator, tmp_path: Path, mode: str) -> None:
    params = serve_params(tmp_path / "data", kns.browser_args, CNKI_INLINE_WAIT_SECONDS="2")
    person = Person(lambda: kns.configure(login="personal", personal_name="reader"))  # logs in there
    with (tmp_path / "stderr.txt").open("w") as errlog:
        client = Client(stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=person)  # type: ignore[arg-type]
        async with client:
            mcp = McpSession(client, tmp_path / "data")
            warm = await mcp.wait(await search(mcp, "绿色金融"))
            assert warm["status"] == "completed", warm  # the template is captured: the wall meets our own POST
            kns.fault("grid", "login", times=1)
            done = await mcp.wait(await search(mcp, "在线教育"))
    assert done["status"] == "completed", done
    assert [r["title"] for r in done["result"]["results"]] == [p.title for p in listed(kns, "在线教育")]
    asked_well(person.asked["accept"])
    assert all("登录" in params.message for params in person.asked["accept"])

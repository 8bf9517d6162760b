"""The person asked in the client, without a browser: how an operation's wait acts on the answer (done resumes,
abandon cancels, none leaves it waiting, a question withdrawn when the pause ends first), the form and its
answers, the 2026-07-28 era's input_required round trip through an in-process client, and planning without
sampling on that era; the routing headers the relay gives a 2026-era request."""

from __future__ import annotations

import asyncio
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp.types import (
    METHOD_NOT_FOUND,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    JSONRPCRequest,
)

from cnki_mcp.core.call import PersonAnswer
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.research.pipeline import plan_search
from cnki_mcp.research.query import ConceptQuery
from cnki_mcp.serving import relay
from cnki_mcp.store.library import Store
from cnki_mcp.surface import elicit, server
from cnki_mcp.tools import get_metadata
from tests.test_contract import FakeApp, decoded


@pytest.fixture
async def jobs(tmp_path: Path):
    store = Store.open(tmp_path)
    yield Jobs(store)
    await store.close()


class Call:
    """A tool call whose client asks the person: ``answers`` in turn (waiting ``delay`` first)."""

    client_supports_sampling = False
    client_supports_elicitation = True

    def __init__(self, *answers: PersonAnswer | None, delay: float = 0.0) -> None:
        self.started = time.monotonic()
        self.answers = list(answers)
        self.delay = delay
        self.asked: list[tuple[str, str]] = []
        self.withdrawn = 0

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        pass

    async def sample(self, system_prompt: str, user_text: str, max_tokens: int, timeout: float) -> str | None:
        return None

    async def ask_person(self, operation_id: str, message: str) -> PersonAnswer | None:
        self.asked.append((operation_id, message))
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.withdrawn += 1
            raise
        return self.answers.pop(0) if self.answers else None


def waits_for_the_person(resumed: list[bool], pauses: int = 1) -> Any:
    """Work that hands ``pauses`` steps to the person, each ended by a resume, then completes."""

    async def work(op: OperationContext) -> str:
        for _ in range(pauses):
            signal = op.await_user("知网要求人工验证：请在弹出的浏览器窗口完成验证，完成后任务会自动继续")
            await within(signal.wait(), 10)
            if op.cancelled:  # as site/human.py's wait does
                raise CnkiError("CANCELLED")
            resumed.append(True)
            op.user_done()
        return "done"

    return work


async def test_done_resumes_the_operation_and_the_call_sees_it_finish(jobs: Jobs) -> None:
    resumed: list[bool] = []
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person(resumed, pauses=2))
    call = Call("done", "done")
    view = await jobs.wait(job, 5, None, call)
    assert view.status == "completed" and resumed == [True, True]
    assert [operation for operation, _ in call.asked] == [job.record.operation_id] * 2  # each pause asked once
    assert "浏览器窗口" in call.asked[0][1]


async def test_abandon_cancels_the_operation(jobs: Jobs) -> None:
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person([]))
    view = await jobs.wait(job, 5, None, Call("abandon"))
    assert view.status == "cancelled"


async def test_no_answer_leaves_it_awaiting_the_person_as_today(jobs: Jobs) -> None:
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person([]))
    begun = time.monotonic()
    view = await jobs.wait(job, 5, None, Call(None))
    assert view.status == "awaiting_user" and "浏览器窗口" in view.message
    assert time.monotonic() - begun < 4  # not the whole 5 s wait
    await jobs.cancel(job.record.operation_id)


async def test_the_question_is_withdrawn_when_the_pause_ends_first(jobs: Jobs) -> None:
    resumed: list[bool] = []
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person(resumed))
    call = Call("abandon", delay=30)  # the person never answers in time
    waiting = asyncio.create_task(jobs.wait(job, 5, None, call))
    while not call.asked:
        await asyncio.sleep(0.01)
    await jobs.resume(job.record.operation_id)  # the page cleared, or operation_control resume
    view = await within(waiting, 5)
    assert view.status == "completed" and resumed == [True] and call.withdrawn == 1


async def test_a_status_call_asks_about_an_operation_already_waiting(jobs: Jobs) -> None:
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person([]))
    while job.record.status != "awaiting_user":
        await asyncio.sleep(0.01)
    view = await jobs.status(job.record.operation_id, 30, None, Call("done"))
    assert view.status == "completed"


async def test_a_question_asked_later_ends_the_wait_at_once(jobs: Jobs) -> None:
    """The 2026-07-28 era: the client is asked by the call's answer, so even a status wait returns now."""
    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person([]))
    while job.record.status != "awaiting_user":
        await asyncio.sleep(0.01)
    begun = time.monotonic()
    view = await jobs.status(job.record.operation_id, 30, None, Call("later"))
    assert view.status == "awaiting_user" and time.monotonic() - begun < 10  # not the 30 s status wait
    await jobs.cancel(job.record.operation_id)


async def test_a_client_that_cannot_ask_after_all_waits_as_today(jobs: Jobs) -> None:
    class Unable(Call):
        async def ask_person(self, operation_id: str, message: str) -> PersonAnswer | None:
            self.asked.append((operation_id, message))
            self.client_supports_elicitation = False  # "Method not found"
            return None

    job = jobs.start("metadata", get_metadata.BUDGET.of(), waits_for_the_person([]))
    while job.record.status != "awaiting_user":
        await asyncio.sleep(0.01)
    call = Unable()
    begun = time.monotonic()
    view = await jobs.status(job.record.operation_id, 1, None, call)
    assert view.status == "awaiting_user" and len(call.asked) == 1
    assert time.monotonic() - begun >= 0.9  # waited its wait, as for a client without elicitation
    await jobs.cancel(job.record.operation_id)


def test_the_form_asks_one_choice_and_never_a_password() -> None:
    assert list(elicit.SCHEMA["properties"]) == ["choice"] and elicit.SCHEMA["required"] == ["choice"]
    assert elicit.SCHEMA["properties"]["choice"]["enum"] == ["完成了", "放弃"]
    assert "密码" not in str(elicit.SCHEMA) and "password" not in str(elicit.SCHEMA).lower()
    text = elicit.question("知网要求登录：请在弹出的浏览器窗口登录，完成后任务会自动继续")
    assert text.startswith("知网要求登录") and "「完成了」" in text and "「放弃」" in text
    assert elicit.answer_of(ElicitResult(action="accept", content={"choice": "完成了"})) == "done"
    assert elicit.answer_of(ElicitResult(action="accept", content={"choice": "放弃"})) == "abandon"
    assert elicit.answer_of(ElicitResult(action="decline")) == "abandon"
    assert elicit.answer_of(ElicitResult(action="cancel")) is None


def person(*answers: ElicitResult, asked: list[ElicitRequestParams]) -> Any:
    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return answers[len(asked) - 1]

    return callback


def operation(status: str, **more: Any) -> dict[str, Any]:
    """A fake operation's view with the fields every tool's output schema requires of one."""
    budget = {"max_requests": 1, "timeout_seconds": 1}
    return {"operation_id": "op_1", "kind": "search", "status": status, "requests": 0, "active_seconds": 0, "budget": budget, **more}


def waiting_app() -> FakeApp:
    """A tool whose operation waits for the person; operation_status says what the person's answer did."""

    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        said = await ctx.ask_person("op_1", "知网要求人工验证：请在弹出的浏览器窗口完成验证")
        status = {"done": "running", "abandon": "cancelled"}.get(said or "", "awaiting_user")
        return operation(status, tool=tool)

    return FakeApp(answer)


@pytest.mark.parametrize(("reply", "status"), [
    (ElicitResult(action="accept", content={"choice": "完成了"}), "running"),
    (ElicitResult(action="decline"), "cancelled"),
    (ElicitResult(action="cancel"), "awaiting_user"),
])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_person_is_asked_in_both_eras(mode: str, reply: ElicitResult, status: str) -> None:
    asked: list[ElicitRequestParams] = []
    app = waiting_app()
    async with Client(server.build_server(app), mode=mode, elicitation_callback=person(reply, asked=asked)) as client:
        data = decoded(await client.call_tool("search", {"query": "违约金"}))
    assert data["status"] == status
    (params,) = asked
    assert isinstance(params, ElicitRequestFormParams) and "浏览器窗口" in params.message
    # 2026: the retry is answered as operation_status for the operation its sealed state names.
    assert [tool for tool, _ in app.calls] == (["search", "operation_status"] if mode == "auto" else ["search"])
    assert data["tool"] == app.calls[-1][0]


async def test_a_client_answering_method_not_found_is_treated_as_without_elicitation() -> None:
    async def unable(context: Any, params: ElicitRequestParams) -> ErrorData:
        return ErrorData(code=METHOD_NOT_FOUND, message="Method not found")

    app = waiting_app()
    async with Client(server.build_server(app), mode="legacy", elicitation_callback=unable) as client:
        data = decoded(await client.call_tool("search", {"query": "违约金"}))
    assert data["status"] == "awaiting_user" and app.contexts[0].client_supports_elicitation is False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_elicitation_is_not_asked(mode: str) -> None:
    app = waiting_app()
    async with Client(server.build_server(app), mode=mode) as client:
        data = decoded(await client.call_tool("search", {"query": "违约金"}))
    assert data["status"] == "awaiting_user" and [tool for tool, _ in app.calls] == ["search"]


async def test_a_state_not_sealed_here_is_refused() -> None:
    async with Client(server.build_server(waiting_app()), mode="auto") as client:
        with pytest.raises(Exception, match="requestState"):
            await client.session.call_tool("search", {"query": "违约金"}, request_state="v1.forged")


async def test_a_2026_era_search_is_planned_without_sampling() -> None:
    """Sampling is deprecated in the 2026-07-28 era: the plan is the caller's groups or our own, at once."""
    asked: list[CreateMessageRequestParams] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)  # never: the plan below would say "sampling"
        raise AssertionError("sampling on a 2026-era call")

    async def plan(tool: str, args: Any, ctx: server.CallContext) -> Any:
        began = time.monotonic()
        own, given = await plan_search(ConceptQuery(text="违约金 调整"), ctx), await plan_search(
            ConceptQuery(text="违约金 调整", groups=[["违约金"], ["调整"]]), ctx
        )
        return {"methods": [own.method, given.method], "notes": own.warnings, "seconds": time.monotonic() - began}

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning either
        async with Client(server.build_server(FakeApp(plan)), mode="auto", sampling_callback=sampling) as client:
            data = decoded(await client.call_tool("session_status", {}))  # a tool answering any object
    assert data["methods"] == ["lexical", "explicit"] and data["seconds"] < 1 and not asked
    assert not [w for w in data["notes"] if "采样" in w or "客户端模型" in w]  # only the planner's own note


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_other_requests_are_answered_while_the_person_is_asked(mode: str) -> None:
    released = asyncio.Event()
    asked: list[ElicitRequestParams] = []

    async def slow_person(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        await released.wait()
        return ElicitResult(action="accept", content={"choice": "完成了"})

    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        if tool == "session_status":  # a tool answering any object
            return {"status": "completed"}
        said = await ctx.ask_person("op_1", "请在浏览器窗口完成验证")
        return operation("running" if said == "done" else "awaiting_user")

    async with Client(server.build_server(FakeApp(answer)), mode=mode, elicitation_callback=slow_person) as client:
        asking = asyncio.create_task(client.call_tool("search", {"query": "违约金"}))
        while not asked:
            await asyncio.sleep(0.01)
        other = await within(client.call_tool("session_status", {}), 5)
        assert decoded(other) == {"status": "completed"} and not asking.done()
        released.set()
        assert decoded(await within(asking, 5))["status"] == "running"


def test_the_relay_gives_a_2026_request_its_routing_headers() -> None:
    """A stdio client sends no headers: the relay takes them from the body, as the owner's endpoint requires."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    call = JSONRPCRequest(jsonrpc="2.0", id=3, method="tools/call", params={"name": "search", "arguments": {}, "_meta": meta})
    stamped = relay.stamped(SessionMessage(call))
    assert isinstance(stamped.metadata, ClientMessageMetadata) and stamped.message is call
    assert stamped.metadata.headers == {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "search"}
    discover = JSONRPCRequest(jsonrpc="2.0", id=1, method="server/discover", params={"_meta": meta})
    assert relay.stamped(SessionMessage(discover)).metadata.headers == {  # type: ignore[union-attr]
        "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover",
    }
    legacy = SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call", params={"name": "search"}))
    assert relay.stamped(legacy) is legacy

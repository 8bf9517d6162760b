"""The person, asked in the client: a form elicitation when an operation waits for someone at the browser.

When a captcha, a CNKI login or a remote-access login needs the person, the operation reads ``awaiting_user``
(``site/human.py``). A client that supports form elicitation is asked too, in Chinese: what to do in the browser
window, and one choice, 完成了 or 放弃 — never a password or anything else typed. 完成了 (accept) makes the
operation look again and go on, 放弃 (or decline) cancels it, and a dismissed question or none at all leaves it
``awaiting_user``, as for a client that cannot ask.

In the 2025 era the question is an ``elicitation/create`` request on the tool call; in the 2026-07-28 era the
call's answer is ``input_required`` with the question and a ``requestState`` (sealed by the SDK's boundary
before it leaves) naming the operation; the client's retry carries the answer, and is answered as
``operation_status`` would answer for that operation.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from cnki_mcp.core import settings
from cnki_mcp.core.call import PersonAnswer
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.tool_args import STATUS_WAIT_MAX

DONE = "完成了"
ABANDON = "放弃"
CHOICE = "choice"
INPUT_KEY = "person"  # the key of the question in ``input_requests`` and of the answer in ``input_responses``
# A person may take the whole wait for them (20 min) before answering; the state must outlive it.
STATE_SECONDS = 30 * 60.0

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        CHOICE: {
            "type": "string",
            "title": "浏览器窗口里的操作",
            "description": f"在浏览器窗口处理好之后选「{DONE}」；不想继续就选「{ABANDON}」，任务会被取消。",
            "enum": [DONE, ABANDON],
            "default": DONE,
        }
    },
    "required": [CHOICE],
}


def question(message: str) -> str:
    """What the person reads: the operation's message (what to do in the browser window) and the choices."""
    return f"{message.rstrip('。')}。处理好之后请选「{DONE}」，任务会重新检查并继续；选「{ABANDON}」会取消这个任务。"


def supports_form(caps: ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (an empty ``elicitation`` object means form)."""
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def answer_of(result: ElicitResult) -> PersonAnswer | None:
    """accept with 完成了: done; accept with 放弃, or decline: abandon; cancel (dismissed): no answer."""
    if result.action == "decline":
        return "abandon"
    if result.action != "accept":
        return None
    return "abandon" if (result.content or {}).get(CHOICE) == ABANDON else "done"


# --- the 2026-07-28 era: input_required and its retry ---------------------------------------------


def boundary() -> RequestStateBoundary:
    """The server middleware sealing our ``requestState`` (a key of this process: a retry after a change of
    owner is refused, and the question is asked again by the next call)."""
    return RequestStateBoundary(_security(), default_audience="cnki")


@cache
def _security() -> RequestStateSecurity:
    """One key for the process: the stdio server and the endpoint others join seal alike."""
    return RequestStateSecurity.ephemeral(ttl=STATE_SECONDS)


def asked(result: CallToolResult, asking: tuple[str, str] | None) -> CallToolResult | InputRequiredResult:
    """The call's answer: ``input_required`` with the question when the operation it names still waits for the
    person (``asking``: the operation and its message), else ``result``."""
    view = result.structured_content or {}
    if asking is None or view.get("status") != "awaiting_user" or view.get("operation_id") != asking[0]:
        return result
    operation_id, message = asking
    ask = ElicitRequest(params=ElicitRequestFormParams(message=question(message), requested_schema=SCHEMA))
    # Plain here: the boundary seals it on the way out.
    return InputRequiredResult(input_requests={INPUT_KEY: ask}, request_state=json.dumps({"operation_id": operation_id}))


def retried(params: CallToolRequestParams, answered: list[PersonAnswer | None]) -> tuple[str, dict[str, Any]]:
    """What a retried call runs: ``operation_status`` for the operation its (unsealed) state names, the person's
    answer in it appended to ``answered``; a dismissed question is answered at once, as without one."""
    try:
        operation_id = json.loads(params.request_state or "")["operation_id"]
        if not isinstance(operation_id, str):
            raise TypeError(operation_id)
    except (ValueError, TypeError, KeyError):  # sealed by us, so only a state of an older version of ours
        raise CnkiError("INVALID_INPUT", "requestState 不是本服务给出的；请重新调用工具。") from None
    answer = _answer_in(params.input_responses or {})
    answered.append(answer)
    wait = 0 if answer is None else min(int(settings.inline_wait_seconds()), STATUS_WAIT_MAX)
    return "operation_status", {"operation_id": operation_id, "wait_seconds": wait}


def _answer_in(responses: dict[str, Any]) -> PersonAnswer | None:
    response = responses.get(INPUT_KEY)
    if isinstance(response, ElicitResult):
        return answer_of(response)
    try:
        return answer_of(ElicitResult.model_validate(response, by_name=False))
    except ValueError:  # none, or not an elicitation's answer
        return None

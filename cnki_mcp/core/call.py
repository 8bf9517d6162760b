"""The tool call a piece of work belongs to, as the layers below the MCP surface see it.

``surface.server.CallContext`` is the implementation; work started by a call uses it to count the
inline wait from the call's arrival, to send progress, to ask the client's model (sampling) and to ask the
person at the client (elicitation) whether a step in the browser window is done.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

# The person's answer: the step in the browser is done (look again, go on), or the operation is abandoned; or
# later: the client asks once the call has answered (the 2026-07-28 era's input_required), so the wait ends now.
PersonAnswer = Literal["done", "abandon", "later"]


class ToolCall(Protocol):
    started: float  # time.monotonic() when the call arrived
    client_supports_sampling: bool
    client_supports_elicitation: bool  # the person can be asked in the client (form elicitation)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None: ...

    async def sample(self, system_prompt: str, user_text: str, max_tokens: int, timeout: float) -> str | None:
        """The client model's reply, or None (no sampling, refused, failed or over ``timeout``)."""
        ...

    async def ask_person(self, operation_id: str, message: str) -> PersonAnswer | None:
        """The person's answer to ``message`` (what to do in the browser window), asked in the client; None when
        the client cannot ask, the person dismissed it, or no answer came in time (the wait goes on as for a
        client that cannot ask)."""
        ...


def seconds_since(call: ToolCall | None) -> float:
    """Seconds since ``call`` arrived (0 without a call)."""
    return time.monotonic() - call.started if call is not None else 0.0

"""The tool call a piece of work belongs to, as the layers below the MCP surface see it.

``surface.server.CallContext`` is the implementation; work started by a call uses it to count the
inline wait from the call's arrival, to send progress, and to ask the client's model (sampling).
"""

from __future__ import annotations

import time
from typing import Protocol


class ToolCall(Protocol):
    started: float  # time.monotonic() when the call arrived
    client_supports_sampling: bool

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None: ...

    async def sample(self, system_prompt: str, user_text: str, max_tokens: int, timeout: float) -> str | None:
        """The client model's reply, or None (no sampling, refused, failed or over ``timeout``)."""
        ...


def seconds_since(call: ToolCall | None) -> float:
    """Seconds since ``call`` arrived (0 without a call)."""
    return time.monotonic() - call.started if call is not None else 0.0

"""The operation a site request belongs to, as the site layer sees it.

The site charges the operation's budget, names its stages, records its errors and asks the person
through it; it never starts, stores or waits for operations itself. ``ops.jobs.OperationContext`` is
the implementation; this Protocol keeps the site layer below ``ops``.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import Any, Protocol

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Problem


class SiteOperation(Protocol):
    @property
    def operation_id(self) -> str: ...

    @property
    def on_verification(self) -> str:
        """``ask`` (hand a challenge to the person) or ``skip`` (refuse at once)."""
        ...

    @property
    def cancelled(self) -> bool: ...

    def remaining_seconds(self) -> float | None: ...

    def remaining_requests(self) -> int | None: ...

    def charge(self) -> None:
        """Count one request against the budget (raises when it is spent)."""

    def stage(self, name: str, progress: dict[str, Any] | None = None) -> None: ...

    def stage_while(self, name: str, progress: dict[str, Any]) -> AbstractContextManager[None]: ...

    def add_error(self, problem: Problem | CnkiError) -> None: ...

    def await_user(self, message: str) -> asyncio.Event:
        """The operation waits for the person (status awaiting_user) until the event is set."""
        ...

    def user_done(self) -> None: ...

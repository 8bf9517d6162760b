"""The person in the loop: a captcha or a login prompt handed to the person, waited for, hidden again.

While a person works on a page its window comes to the front (a headless browser only logs that it
cannot), the operation reads ``awaiting_user`` (time waiting is not charged to its budget), and
``operation_control show`` brings the page back. A challenge also holds every other CNKI request
of the process (the limiter) until it is solved; a login does not. The wait ends when ``done`` says
so (a challenge: the page clear on two looks in a row; a login: an identity shows), when the person
says so (``operation_control resume``), or after the wait allowed (20 minutes by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from cnki_mcp.core.clock import Deadline, within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.site.browser import Browser, Tab
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.remote import GATEWAY_MESSAGE, gateway_problem, show_gateway

log = logging.getLogger(__name__)

HUMAN_POLL = 1.0
HUMAN_CLEAR_OBSERVATIONS = 2
HUMAN_TIMEOUT = 20 * 60.0
MINIMIZE_TIMEOUT = 2.0

VERIFY_MESSAGE = "知网要求人工验证：请在弹出的浏览器窗口完成验证，完成后任务会自动继续"
LOGIN_MESSAGE = "知网要求登录：请在弹出的浏览器窗口登录，完成后任务会自动继续"
# A challenge met while the KNS header last showed no login at all: such sessions meet the slider far more often.
ANONYMOUS_VERIFY_MESSAGE = (
    VERIFY_MESSAGE + "。当前没有登录任何账号（匿名访问），知网对匿名访问更常要求这类验证（多为滑块）；"
    "登录个人账号或机构账号（调用 login，校外可经学校 VPN 或 CARSI）后就会少很多"
)

Check = Callable[[], Awaitable[bool]]
Observe = Callable[[Tab], Awaitable[Any]]
Snapshot = Callable[[str, Tab], Awaitable[str]]
Request = Callable[[OperationContext], contextlib.AbstractAsyncContextManager[None]]  # Door.request: charged, paced


def refuse_if_skipping(op: OperationContext, reason: CnkiError) -> None:
    """VERIFICATION_SKIPPED when the operation was asked to skip what needs a person."""
    if op.on_verification == "skip":
        raise CnkiError(
            "VERIFICATION_SKIPPED",
            "按 on_verification=skip 跳过了需要人工处理的资源（这不代表没有访问权限）。",
            details={"reason": reason.code},
        )


def span(seconds: float) -> str:
    """A wait as a person reads it: 20 分钟, 90 秒."""
    return f"{seconds / 60:g} 分钟" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} 秒"


class Person:
    """The person at the dedicated browser, for every operation of this process."""

    def __init__(
        self, browser: Browser, limiter: Limiter, observe: Observe, tab_snapshot: Snapshot, request: Request
    ) -> None:
        self.browser = browser
        self.limiter = limiter
        self._request = request
        self.timeout = HUMAN_TIMEOUT
        self.poll = HUMAN_POLL
        self._observe = observe
        self._tab_snapshot = tab_snapshot
        self._lock = asyncio.Lock()
        self._epoch = 0
        self._pages: dict[str, Tab] = {}
        # What the KNS header showed last: a personal or institution login (True), none (False), not seen (None).
        self.signed_in: bool | None = None

    @property
    def epoch(self) -> int:
        """Number of finished challenge steps; a caller that saw a challenge under an older epoch just retries."""
        return self._epoch

    def page(self, operation_id: str | None = None) -> Tab | None:
        """The tab currently handed to the person: this operation's, or any when no id is given."""
        if operation_id:
            return self._pages.get(operation_id)
        return next(iter(self._pages.values()), None)

    async def show(self, operation_id: str | None = None) -> dict[str, Any]:
        """``operation_control show``: bring the page waiting for the person to the front again."""
        tab = self.page(operation_id)
        if tab is None:
            raise CnkiError("VERIFICATION_NOT_FOUND")
        await self.browser.bring_to_front(tab)
        return {"status": "shown"}

    async def present(self, tab: Tab) -> None:
        """Bring a tab to the person; headless or unconfirmed windows are logged, not fatal."""
        try:
            shown = await self.browser.bring_to_front(tab)
        except CnkiError as exc:
            if exc.code != "WINDOW_STATE_UNCONFIRMED":
                raise
            log.warning("the window for a person did not confirm its state: %s", exc.message)
            return
        if not shown:
            log.info("headless browser: the page for a person cannot be shown on screen")

    async def hide(self, tab: Tab) -> None:
        try:
            await within(self.browser.minimize(tab), MINIMIZE_TIMEOUT)
        except (CnkiError, TimeoutError) as exc:
            log.debug("minimising after a human step failed: %s", exc)

    @contextlib.contextmanager
    def _handed(self, op: OperationContext, tab: Tab) -> Iterator[None]:
        """Record ``tab`` as the page ``show`` brings back while the person works on it."""
        self._pages[op.operation_id] = tab
        try:
            yield
        finally:
            if self._pages.get(op.operation_id) is tab:
                del self._pages[op.operation_id]

    async def attend(
        self,
        op: OperationContext,
        tab: Tab,
        message: str,
        done: Check,
        *,
        timeout: float,
        poll: float,
        expired: Callable[[], Awaitable[CnkiError]],
    ) -> None:
        """Show ``tab`` to the person, wait until ``done()`` (or resume), hide it again.

        Raises CANCELLED, or ``expired()`` when ``timeout`` seconds pass first.
        """
        with self._handed(op, tab):
            await self.present(tab)
            resume = op.await_user(message)
            try:
                deadline = Deadline(timeout)
                while not resume.is_set():
                    if op.cancelled:
                        raise CnkiError("CANCELLED")
                    if await done():
                        return
                    if deadline.passed:
                        raise await expired()
                    with contextlib.suppress(TimeoutError):
                        await within(resume.wait(), min(poll, deadline.remaining()))
                # A cancel also sets the resume signal, and the task's own cancellation can be lost
                # when both land together: the operation must stop, not carry on as if resumed.
                if op.cancelled:
                    raise CnkiError("CANCELLED")
            finally:
                op.user_done()
                await self.hide(tab)

    async def step(self, op: OperationContext, tab: Tab, reason: CnkiError, *, epoch: int | None = None) -> None:
        """Hand ``tab`` to the person until the challenge or login prompt on it is gone.

        ``reason`` is the VERIFICATION_REQUIRED or LOGIN_REQUIRED problem that was met. Pass the
        ``epoch`` read before the failed request: when another step finished meanwhile, this returns
        at once so the caller simply retries. Raises VERIFICATION_SKIPPED (``on_verification=skip``),
        VERIFICATION_TIMEOUT, CANCELLED, or BROWSER_UNAVAILABLE. Usable from any tab (grid, reader,
        download): the caller retries its own request afterwards.
        """
        refuse_if_skipping(op, reason)
        async with self._lock:
            if epoch is not None and epoch != self._epoch:
                return
            message = LOGIN_MESSAGE if reason.code == "LOGIN_REQUIRED" else VERIFY_MESSAGE
            if reason.code != "LOGIN_REQUIRED" and self.signed_in is False:
                message = ANONYMOUS_VERIFY_MESSAGE
            if gateway_problem(reason):
                message = GATEWAY_MESSAGE
                await show_gateway(self.browser, tab, lambda: self._request(op))
            self.limiter.hold()
            try:
                await self.attend(
                    op, tab, message, self._cleared(tab), timeout=self.timeout, poll=self.poll,
                    expired=lambda: self._expired(tab),
                )
            finally:
                self._epoch += 1
                self.limiter.slow()
                self.limiter.release()

    def _cleared(self, tab: Tab) -> Check:
        """Whether the page is clear of challenges and login prompts on two looks in a row."""
        clear = 0

        async def check() -> bool:
            nonlocal clear
            seen = await self._observe(tab)
            if seen is not None and seen.ready and seen.page.state in ("ready", "denied"):
                clear += 1
                return clear >= HUMAN_CLEAR_OBSERVATIONS
            clear = 0
            return False

        return check

    async def _expired(self, tab: Tab) -> CnkiError:
        return CnkiError(
            "VERIFICATION_TIMEOUT",
            f"等待人工验证超过 {span(self.timeout)}，已停止等待；处理好浏览器窗口里的验证后重新调用即可。",
            details={"url": tab.url.split("?", 1)[0], "snapshot": await self._tab_snapshot("challenge", tab)},
        )

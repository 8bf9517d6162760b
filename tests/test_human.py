"""The person in the loop (site/human.py) without a browser: a step handed to the person ends when its caller
stops it, whatever the moment."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.site.browser import Browser, Tab
from cnki_mcp.site.human import Person
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.store.library import Store
from cnki_mcp.tools import download_paper


class HeadlessBrowser:
    """What a step asks of the browser: there is no window to bring forward or minimise."""

    async def bring_to_front(self, tab: Any) -> bool:
        return False

    async def minimize(self, tab: Any) -> bool:
        return True


@contextlib.asynccontextmanager
async def no_request(op: OperationContext) -> AsyncIterator[None]:
    yield


async def no_snapshot(kind: str, tab: Any) -> str:
    return ""


async def test_a_step_stopped_as_a_look_at_the_page_answers_stops(tmp_path: Path) -> None:
    """The download's person step is stopped once the file begins; a look at the page answering at that very moment
    must not swallow the stop (it did on Python 3.11 through asyncio.wait_for: 20 minutes of awaiting_user)."""
    answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    looking = asyncio.Event()

    async def observe(tab: Any) -> None:
        looking.set()
        return await within(answer, 5)  # a script in the page, waited for as page_io waits for it

    limiter = Limiter(0)
    person = Person(cast(Browser, HeadlessBrowser()), limiter, observe, no_snapshot, no_request)
    store = Store.open(tmp_path)
    jobs = Jobs(store)
    outcome: list[str] = []

    def status() -> str:
        return jobs.view(job).status  # the job below: started before its work first runs

    async def work(op: OperationContext) -> None:
        step = asyncio.create_task(person.step(op, cast(Tab, object()), CnkiError("VERIFICATION_REQUIRED")))
        await looking.wait()
        outcome.append(status())
        answer.set_result(None)
        step.cancel()  # the file began: the page needs the person no more
        try:
            await within(step, 5)
        except asyncio.CancelledError:
            outcome.append("stopped")
        outcome.append(status())

    try:
        job = jobs.start("download", download_paper.BUDGET.of(), work)
        await jobs.wait(job, 10)
    finally:
        await store.close()
    assert outcome == ["awaiting_user", "stopped", "running"]
    assert limiter.held is False

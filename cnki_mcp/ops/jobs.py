"""Operations: background work with budgets, human pauses, checkpoints, long-polling and cancel.

A tool that needs CNKI starts an operation and waits for it inline for a while
(``CNKI_INLINE_WAIT_SECONDS``); whatever is not finished by then is followed with
``operation_status``. Records live in the store, so a restarted server still answers for them:
one that was running when the process died reads as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec

from cnki_mcp.core import settings
from cnki_mcp.core.call import PersonAnswer, ToolCall, seconds_since
from cnki_mcp.core.clock import Deadline, utc_now_iso, within
from cnki_mcp.core.errors import UNREACHED_CODES, CnkiError, as_cnki_error, for_its_tool
from cnki_mcp.core.model import Budget, BudgetView, Operation, OperationView, Problem
from cnki_mcp.core.tool_args import CONTINUE_REQUESTS, CONTINUE_SECONDS
from cnki_mcp.store.library import KEEP_OPERATIONS, Store

log = logging.getLogger(__name__)

FINAL_STATUSES = frozenset({"completed", "partial", "failed", "skipped", "cancelled"})
LIVE_STATUSES = frozenset({"running", "awaiting_user"})
MAX_WAIT_SECONDS = 55
CANCEL_GRACE_SECONDS = 5.0
RESUME_WAIT_SECONDS = 3.0
# How long a question to the person in the client may stay open: the person's own wait (site/human.py, 20 min)
# ends the pause before, which withdraws the question; this only bounds a client that never answers.
ASK_SECONDS = 25 * 60.0
INTERRUPTED_MESSAGE = "服务进程在任务运行中退出；检索任务和批量下载任务可以用 operation_control 的 continue 继续，其他任务请重新调用原工具。"

# Kinds whose work keeps a checkpoint and so can continue (a caller may name more: the batch download).
CONTINUABLE = frozenset({"search"})


def new_operation_id() -> str:
    return "op_" + secrets.token_hex(12)


class Job:
    """A live operation: its record, its task and the clocks that make up active time."""

    def __init__(self, record: Operation, carried_seconds: float, a_list: bool = False) -> None:
        self.record = record
        self.a_list = a_list  # the tool was asked for a list: its failure says so (errors.for_its_tool)
        self.carried_seconds = carried_seconds
        self.started = time.monotonic()
        self.paused_total = 0.0
        self.pause_started: float | None = None
        self.resume_signal: asyncio.Event | None = None
        self.pause_version = 0  # counts the pauses for a person: each is asked about once
        self.version = 0
        # Replaced on every change: waiters hold the current one, so no wake-up is ever lost.
        self.changed = asyncio.Event()
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.cancel_requested = False
        self.frame: dict[str, Any] = {}  # progress every stage carries under its own (a batch's paper k of n)

    def active_seconds(self) -> float:
        now = time.monotonic()
        current_pause = now - self.pause_started if self.pause_started is not None else 0.0
        return max(0.0, self.carried_seconds + (now - self.started) - self.paused_total - current_pause)


class OperationContext:
    """What the work function of an operation sees: budget charging, stages, errors, human pauses."""

    def __init__(self, jobs: Jobs, job: Job) -> None:
        self._jobs = jobs
        self._job = job

    @property
    def operation_id(self) -> str:
        return self._job.record.operation_id

    @property
    def budget(self) -> Budget:
        return self._job.record.budget

    @property
    def on_verification(self) -> str:
        return self._job.record.budget.on_verification or "ask"

    @property
    def requests(self) -> int:
        return self._job.record.requests

    def remaining_seconds(self) -> float | None:
        """Active time left in the budget (None: no time limit)."""
        limit = self._job.record.budget.timeout_seconds
        return None if limit <= 0 else limit - self._job.active_seconds()

    def remaining_requests(self) -> int | None:
        """Requests left in the budget (None: no request limit)."""
        limit = self._job.record.budget.max_requests
        return None if limit <= 0 else limit - self._job.record.requests

    def charge(self) -> None:
        """Admit one CNKI request against the budget (called before the limiter slot is taken)."""
        job = self._job
        if job.cancel_requested:
            raise CnkiError("CANCELLED")
        budget = job.record.budget
        if budget.max_requests > 0 and job.record.requests >= budget.max_requests:
            raise CnkiError(
                "BUDGET_EXHAUSTED",
                f"请求预算（{budget.max_requests} 次）已用完；可用 operation_control 的 continue 并指定 additional_requests 继续。",
                details={"budget": "requests", "max_requests": budget.max_requests},
            )
        if budget.timeout_seconds > 0 and job.active_seconds() > budget.timeout_seconds:
            raise CnkiError(
                "BUDGET_EXHAUSTED",
                f"运行时间预算（{budget.timeout_seconds} 秒）已用完；可用 operation_control 的 continue 并指定 additional_seconds 继续。",
                details={"budget": "seconds", "timeout_seconds": budget.timeout_seconds},
            )
        job.record.requests += 1
        self._jobs._touch(job)

    def stage(self, name: str, progress: dict[str, Any] | None = None) -> None:
        self._job.record.stage = name
        if progress is not None:
            self._job.record.progress = {**self._job.frame, **progress} if self._job.frame else progress
        self._jobs._touch(self._job)

    def frame(self, progress: dict[str, Any]) -> None:
        """Progress kept under every later stage's own (``done``/``total``/``title`` of a batch's paper)."""
        self._job.frame = dict(progress)
        self.stage(self._job.record.stage, {})

    @contextlib.contextmanager
    def stage_while(self, name: str, progress: dict[str, Any]) -> Iterator[None]:
        """Show ``name`` for the duration of a step (a wait), then the stage that was shown before."""
        record = self._job.record
        before, before_progress = record.stage, record.progress
        self.stage(name, progress)
        try:
            yield
        finally:
            record.stage, record.progress = before, before_progress
            self._jobs._touch(self._job)

    def add_error(self, problem: Problem | CnkiError) -> None:
        if isinstance(problem, CnkiError):
            problem = problem.problem()
        self._job.record.errors.append(problem)
        self._jobs.note_error(self._job, problem.code)
        self._jobs._touch(self._job)

    def checkpoint(self, state: Any) -> None:
        """Keep the resumable state of a search in the stored record (flushed within 2 s).

        The active time goes with it, so a search continued after a crash keeps its time budget.
        """
        self._job.record.checkpoint = msgspec.to_builtins(state)
        self._job.record.active_seconds = round(self._job.active_seconds(), 1)
        self._jobs._touch(self._job)

    @property
    def errors(self) -> list[Problem]:
        """Problems recorded so far (per-record failures, failed channels)."""
        return list(self._job.record.errors)

    @property
    def restored_checkpoint(self) -> Any:
        return self._job.record.checkpoint

    def await_user(self, message: str) -> asyncio.Event:
        """Enter ``awaiting_user``: the pause clock starts and a fresh resume signal is armed."""
        job = self._job
        if job.pause_started is None:
            job.pause_started = time.monotonic()
        job.resume_signal = asyncio.Event()
        job.pause_version += 1
        job.record.status = "awaiting_user"
        job.record.message = message
        self._jobs._touch(job)
        return job.resume_signal

    def user_done(self) -> None:
        job = self._job
        if job.pause_started is not None:
            job.paused_total += time.monotonic() - job.pause_started
            job.pause_started = None
        if job.record.status == "awaiting_user":
            job.record.status = "running"
        job.record.message = ""
        self._jobs._touch(job)

    @property
    def cancelled(self) -> bool:
        return self._job.cancel_requested


Work = Callable[[OperationContext], Awaitable[Any]]
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


class Jobs:
    """All operations of this process; records persist in the store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._live: dict[str, Job] = {}

    # --- starting -------------------------------------------------------------------------

    def start(
        self, kind: str, budget: Budget, work: Work, *, resume_from: Operation | None = None, a_list: bool = False
    ) -> Job:
        now = utc_now_iso()
        if resume_from is None:
            record = Operation(
                operation_id=new_operation_id(),
                kind=kind,
                status="running",
                stage="starting",
                budget=budget,
                created_at=now,
                updated_at=now,
            )
            carried = 0.0
        else:
            # continue: same id and created_at; counters and the checkpoint carry over, results do not.
            record = Operation(
                operation_id=resume_from.operation_id,
                kind=resume_from.kind,
                status="running",
                stage="starting",
                requests=resume_from.requests,
                budget=budget,
                checkpoint=resume_from.checkpoint,
                created_at=resume_from.created_at,
                updated_at=now,
            )
            carried = resume_from.active_seconds
        job = Job(record, carried, a_list)
        self._live[record.operation_id] = job
        self._store.put_operation(record)
        job.task = asyncio.create_task(self._run(job, work), name=f"operation {record.operation_id}")
        return job

    async def _run(self, job: Job, work: Work) -> None:
        context = OperationContext(self, job)
        record = job.record
        result: Any = None
        failure: CnkiError | None = None
        cancelled = False
        try:
            result = await work(context)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException as exc:  # noqa: BLE001 - every failure becomes the operation's error
            failure = for_its_tool(as_cnki_error(exc), a_list=job.a_list)
            if failure.code == "OPERATION_FAILED":
                log.exception("operation %s failed", record.operation_id)
            if failure.code == "CANCELLED" and job.cancel_requested:
                cancelled, failure = True, None
        finally:
            if job.pause_started is not None:
                job.paused_total += time.monotonic() - job.pause_started
                job.pause_started = None
        if result is not None:
            try:
                record.result = msgspec.to_builtins(result)
            except (TypeError, ValueError) as exc:  # a result we cannot store must not strand waiters
                log.exception("operation %s returned an unstorable result", record.operation_id)
                result, failure = None, CnkiError("OPERATION_FAILED", f"任务结果无法保存：{exc}")
        if cancelled or job.cancel_requested and failure is None and result is None:
            record.status = "cancelled"
        elif failure is not None:
            record.errors.append(failure.problem())
            self.note_error(job, failure.code)
            if failure.code == "VERIFICATION_SKIPPED":
                record.status = "skipped"
            elif result is not None or failure.retryable and failure.code not in UNREACHED_CODES:
                record.status = "partial"
            else:
                record.status = "failed"
        elif record.errors:
            record.status = "partial"
        else:
            record.status = "completed"
        record.message = ""
        record.active_seconds = round(job.active_seconds(), 1)
        self._live.pop(record.operation_id, None)
        self._touch(job)
        job.done.set()

    def note_error(self, job: Job, code: str) -> None:
        """Count the code in the store's recent errors (a report shows them); a cancel is no error."""
        if code != "CANCELLED":
            self._store.note_error(code, job.record.kind)

    def _touch(self, job: Job) -> None:
        job.record.updated_at = utc_now_iso()
        job.version += 1
        self._store.put_operation(job.record)
        fired, job.changed = job.changed, asyncio.Event()
        fired.set()

    # --- reading --------------------------------------------------------------------------

    def live(self, operation_id: str | None = None) -> Job | None:
        """The live job ``operation_id`` names; without an id, the only live job (None when none runs).

        Several live jobs and no id is OPERATION_ID_REQUIRED: acting on one of them at random could
        cancel or resume the wrong work.
        """
        if operation_id:
            return self._live.get(operation_id)
        if len(self._live) > 1:
            ids = sorted(self._live)
            raise CnkiError(
                "OPERATION_ID_REQUIRED",
                f"有 {len(ids)} 个任务正在运行，请用 operation_id 指定其中一个：{'、'.join(ids)}。",
                details={"operation_ids": ids},
            )
        return next(iter(self._live.values()), None)

    def live_jobs(self) -> list[Job]:
        return list(self._live.values())

    @property
    def live_count(self) -> int:
        return len(self._live)

    def view(self, job_or_record: Job | Operation) -> OperationView:
        """The client's view of an operation: no checkpoint; live active time computed now."""
        record = job_or_record.record if isinstance(job_or_record, Job) else job_or_record
        status, message, seconds = record.status, record.message, record.active_seconds
        if isinstance(job_or_record, Job):
            if status in LIVE_STATUSES:
                seconds = job_or_record.active_seconds()
        elif status in LIVE_STATUSES:
            status, message = "interrupted", INTERRUPTED_MESSAGE
        budget = record.budget
        return OperationView(
            operation_id=record.operation_id,
            kind=record.kind,
            status=status,
            stage=record.stage,
            message=message,
            progress=record.progress,
            requests=record.requests,
            active_seconds=round(seconds, 1),
            budget=BudgetView(budget.max_requests, budget.timeout_seconds, budget.on_verification),
            result=record.result,
            errors=record.errors,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )

    def stored(self, operation_id: str) -> Operation:
        record = self._store.data.operations.get(operation_id)
        if record is not None:
            return record
        if self._store.was_retired("operations", operation_id):
            raise CnkiError(
                "OPERATION_NOT_FOUND",
                f"任务 {operation_id} 已被自动删除：本地只保留最近 {KEEP_OPERATIONS} 个任务；需要时请重新调用原工具。",
                details={"operation_id": operation_id, "reason": "retention"},
            )
        raise CnkiError("OPERATION_NOT_FOUND", f"没有找到任务 {operation_id}（本地只保留最近 {KEEP_OPERATIONS} 个任务）。")

    @staticmethod
    def idle_view() -> OperationView:
        return OperationView(
            operation_id="", kind="", status="idle", requests=0, active_seconds=0.0, budget=BudgetView(0, 0)
        )

    async def wait(
        self, job: Job, seconds: float, progress: ProgressSink | None = None, call: ToolCall | None = None
    ) -> OperationView:
        """Wait until the job ends, newly needs a person, or ``seconds`` pass; return its view.

        A job already awaiting a person is not returned at once: that would make clients poll
        while the person works. It returns when the person is done and a new pause begins.
        With ``call``, a pause is first put to the person in the client (``ask_person``): done resumes the
        job and the wait goes on (for ``RESUME_WAIT_SECONDS`` at least), abandon cancels it, later (the client
        asks after the answer) returns the view now, and no answer waits as without a client that asks. The
        question is withdrawn when the job stops waiting first.
        """
        deadline = Deadline(seconds)
        waiting_at_start = job.record.status == "awaiting_user"
        left_waiting = False
        asked = -1  # the pause (its version) last put to the person
        reported = -1
        # After the person said done, pages other requests left on the same challenge need a moment to show it
        # cleared (two looks): a pause that begins then is not put to the person again, nor returned, at once.
        settling: Deadline | None = None
        while True:
            changed = job.changed
            status = job.record.status
            if job.done.is_set() or status in FINAL_STATUSES:
                break
            settled = settling is None or settling.passed or deadline.passed
            if (
                status == "awaiting_user" and settled and call is not None and call.client_supports_elicitation
                and asked < job.pause_version
            ):
                asked = job.pause_version
                answer = await self._ask(job, call)
                if answer == "abandon":
                    return await self.cancel(job.record.operation_id)
                if answer == "later":
                    break
                if answer == "done":
                    self._resume(job)
                    settling = Deadline(RESUME_WAIT_SECONDS)
                    deadline = Deadline(max(deadline.remaining(), RESUME_WAIT_SECONDS))
                left_waiting = left_waiting or job.record.status != "awaiting_user"
                continue  # no answer: the wait goes on as for a client that cannot ask
            if status == "awaiting_user" and settled and (not waiting_at_start or left_waiting):
                break
            if status != "awaiting_user":
                left_waiting = True
            if deadline.passed:
                break
            if progress is not None and job.version != reported:
                reported = job.version
                await self._report(job, progress)
            wake = deadline.remaining() if settled or settling is None else min(deadline.remaining(), settling.remaining())
            try:
                await within(changed.wait(), wake)
            except TimeoutError:
                pass
        if job.done.is_set() or job.record.status in FINAL_STATUSES:
            await job.done.wait()
        return self.view(job)

    @staticmethod
    async def _ask(job: Job, call: ToolCall) -> PersonAnswer | None:
        """The person's answer to this pause, asked through ``call``; None when none came (in ``ASK_SECONDS``),
        the asking failed, or the job stopped waiting first (its pause over: the question is withdrawn)."""
        pause = job.pause_version
        asking = asyncio.ensure_future(call.ask_person(job.record.operation_id, job.record.message))
        deadline = Deadline(ASK_SECONDS)
        try:
            while not asking.done() and not deadline.passed:
                if job.record.status != "awaiting_user" or job.pause_version != pause:
                    return None
                changed = asyncio.ensure_future(job.changed.wait())
                try:
                    await asyncio.wait({asking, changed}, timeout=deadline.remaining(), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
        finally:
            if not asking.done():
                asking.cancel()
        if not asking.done() or asking.cancelled():
            return None
        if asking.exception() is not None:  # a client that fails to ask leaves the operation waiting, as before
            log.info("asking the person in the client failed", exc_info=asking.exception())
            return None
        return asking.result()

    @staticmethod
    async def _report(job: Job, progress: ProgressSink) -> None:
        record = job.record
        notice = record.progress.get("notice") if isinstance(record.progress, dict) else None
        message = record.message or (notice if isinstance(notice, str) else "") or record.stage
        done = total = None
        title = ""
        if isinstance(record.progress, dict):
            done, total = record.progress.get("done"), record.progress.get("total")
            title = record.progress.get("title") or ""
        value = float(job.version)
        if done is not None and total:
            message = f"{message} {done}/{total}" + (f" {title}" if title else "")
        try:
            await progress(value, None, message)
        except Exception:  # noqa: BLE001 - a client that drops progress must not break the call
            log.debug("progress notification failed", exc_info=True)

    async def inline(self, job: Job, call: ToolCall | None) -> OperationView:
        """A tool call's answer: the job's view up to CNKI_INLINE_WAIT_SECONDS after the call began, with progress
        (and the person asked in the client when it needs them).

        Counted from the call's ``started`` (when the context has one), so time spent before the
        operation started (planning with the client's model) is part of the inline wait.
        """
        progress = call.report_progress if call is not None else None
        return await self.wait(job, settings.inline_wait_seconds() - seconds_since(call), progress, call)

    async def status(
        self, operation_id: str | None, wait_seconds: float, progress: ProgressSink | None = None, call: ToolCall | None = None
    ) -> OperationView:
        wait_seconds = min(max(wait_seconds, 0), MAX_WAIT_SECONDS)
        job = self.live(operation_id)
        if job is not None:
            return await self.wait(job, wait_seconds, progress, call)
        if not operation_id:
            return self.idle_view()
        return self.view(self.stored(operation_id))

    # --- control --------------------------------------------------------------------------

    async def cancel(self, operation_id: str | None) -> OperationView:
        job = self.live(operation_id)
        if job is None:
            if not operation_id:
                return self.idle_view()
            return self.view(self.stored(operation_id))
        job.cancel_requested = True
        if job.resume_signal is not None:
            job.resume_signal.set()
        if job.task is not None:
            job.task.cancel()
        try:
            await within(job.done.wait(), CANCEL_GRACE_SECONDS)
        except TimeoutError:
            log.warning("operation %s did not stop within %.0f s", job.record.operation_id, CANCEL_GRACE_SECONDS)
        return self.view(job)

    async def resume(self, operation_id: str | None) -> OperationView:
        job = self.live(operation_id)
        if job is None:
            if operation_id:
                self.stored(operation_id)
            raise CnkiError("OPERATION_NOT_RUNNING")
        if job.resume_signal is None:
            raise CnkiError("OPERATION_STATE", "这个任务没有在等待人工处理。")
        self._resume(job)
        return await self.wait(job, RESUME_WAIT_SECONDS)

    def _resume(self, job: Job) -> None:
        """The person says the step is done: the job leaves ``awaiting_user`` and looks again."""
        if job.record.status == "awaiting_user" and job.resume_signal is not None:
            job.record.status = "running"
            job.record.message = ""
            self._touch(job)
            job.resume_signal.set()

    def continuation(
        self, operation_id: str, additional_requests: int, additional_seconds: int, kinds: frozenset[str] = CONTINUABLE
    ) -> tuple[Operation, Budget]:
        """Check that a stored operation of one of ``kinds`` (those that keep a checkpoint) can continue,
        and compute its cumulative budget."""
        if operation_id in self._live:
            raise CnkiError("OPERATION_BUSY")
        prior = self.stored(operation_id)
        if prior.kind not in kinds or prior.checkpoint is None:
            raise CnkiError("CONTINUE_UNAVAILABLE")
        if prior.status == "completed":
            raise CnkiError("OPERATION_STATE", "这个任务已经完成，无需继续。")
        budget = msgspec.structs.replace(prior.budget)
        budget.max_requests += max(additional_requests, 0)
        budget.timeout_seconds += max(additional_seconds, 0)
        if additional_requests <= 0 and prior.requests >= budget.max_requests:
            budget.max_requests = prior.requests + CONTINUE_REQUESTS
        if additional_seconds <= 0 and prior.active_seconds >= budget.timeout_seconds:
            budget.timeout_seconds = int(prior.active_seconds) + CONTINUE_SECONDS
        return prior, budget

    async def shutdown(self) -> None:
        """Cancel every live operation so it is stored as cancelled, not interrupted."""
        jobs = list(self._live.values())
        for job in jobs:
            job.cancel_requested = True
            if job.task is not None:
                job.task.cancel()
        for job in jobs:
            try:
                await within(job.done.wait(), CANCEL_GRACE_SECONDS)
            except TimeoutError:
                log.warning("operation %s did not stop at shutdown", job.record.operation_id)

"""Enrichment: what the engine knows of a record beyond a listing row, and how it gets it from CNKI.

Detail pages (reused for 30 days by the same parser), relocation by exact title when a link has
expired, journal evidence (7 days present / 1 day otherwise) fetched once per journal however many
records ask at once, with a 1-hour memory of journal pages whose name does not match the source, title
resolution (a unique local match, else ten exact titles per grid request, four at once), the worker
pool, and get_metadata's network path.

It talks to CNKI only through a ``backend.SiteBackend`` (``site.Site`` in production, ``tests/fake_site.py``
in tests) and stores through the ``Catalog``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from cnki_mcp.core import settings
from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError, as_cnki_error, unreached_with_nothing
from cnki_mcp.core.identity import identity_keys, same_paper
from cnki_mcp.core.model import Paper, Problem, Quality, public_paper
from cnki_mcp.core.text import source_key, title_key
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.research.backend import SiteBackend, followed
from cnki_mcp.site.grid_query import TITLES_PER_LOCATE
from cnki_mcp.store.catalog import Catalog, merge
from cnki_mcp.store.library import detail_is_fresh, journal_is_fresh

log = logging.getLogger(__name__)

LOCATE_WORKERS = 4
MISMATCH_MEMORY_SECONDS = 3600.0
# Failures that belong to one operation, not to the journal: a waiter of a shared fetch retries itself.
_OWNER_ONLY_CODES = frozenset({"BUDGET_EXHAUSTED", "CANCELLED"})


class JournalFlights:
    """Journal fetches of this process: one in flight per journal, and names that did not match (1 hour)."""

    def __init__(self) -> None:
        self.flights: dict[str, asyncio.Future[Quality]] = {}
        self.mismatches: dict[str, float] = {}


# Failures a fresh link cannot cure: no access, a skipped or unsolved challenge, a page we cannot read.
NOT_RELOCATED = frozenset(
    {"ACCESS_DENIED", "VERIFICATION_SKIPPED", "VERIFICATION_REPEATED", "PARSER_UNSUPPORTED", "QUERY_REJECTED", "SITE_TEMPORARILY_EMPTY"}
)


def _wrap(error: CnkiError, paper: Paper, stage: str) -> CnkiError:
    """A record-level failure carries the record; fatal ones pass unchanged."""
    if error.fatal:
        return error
    return CnkiError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={"record_ref": paper.record_ref, "title": paper.title, "stage": stage, "cause": error.details},
    )


class Enrichment:
    """Details, journals and title resolution over one catalogue and one site; cheap to create."""

    def __init__(
        self, catalog: Catalog, site: SiteBackend, journals: JournalFlights, *, workers: int | None = None
    ) -> None:
        self.catalog = catalog
        self.store = catalog.store
        self.site = site
        self.journals = journals
        self.workers = max(1, workers if workers is not None else settings.workers())

    async def parallel(
        self,
        op: OperationContext,
        items: Sequence[Any],
        stage: str,
        work: Callable[[Any], Awaitable[None]],
        workers: int | None = None,
        record_errors: bool = True,
    ) -> CnkiError | None:
        """Run ``work`` over ``items`` in index order; non-fatal errors are recorded, the first fatal returned.

        After a fatal error nothing new starts and work in flight is cancelled, except for
        BUDGET_EXHAUSTED: requests already admitted then land and are stored, so continue does
        not repeat them.
        """
        total = len(items)
        if total == 0:
            return None
        count = min(workers or self.workers, total)
        position = 0
        done = 0
        fatal: CnkiError | None = None
        tasks: list[asyncio.Task[None]] = []

        async def worker() -> None:
            nonlocal position, done, fatal
            while fatal is None and position < total:
                item = items[position]
                position += 1
                try:
                    await work(item)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every failure is classified
                    error = as_cnki_error(exc)
                    if error.code == "OPERATION_FAILED":
                        log.exception("%s item failed", stage)
                    if not error.fatal:
                        if record_errors:
                            op.add_error(error)
                    elif fatal is None:
                        fatal = error
                        if error.code != "BUDGET_EXHAUSTED":
                            me = asyncio.current_task()
                            for task in tasks:
                                if task is not me:
                                    task.cancel()
                done += 1
                op.stage(stage, {"done": done, "total": total})

        tasks.extend(asyncio.create_task(worker()) for _ in range(count))
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        if fatal is not None:
            return fatal
        if op.cancelled:
            return CnkiError("CANCELLED")
        return None

    # -- detail, relocation and journal --

    async def relocate(self, op: OperationContext, paper: Paper) -> Paper:
        """Find ``paper`` again by its exact title (one grid request) and store the fresh locator."""
        rows = (await followed(op, self.site.locate(op, [paper.title]))).get(paper.title, [])
        anonymous = not identity_keys(paper)
        accepted = [row for row in rows if anonymous or same_paper(paper, row)]
        if len(accepted) > 1:
            raise CnkiError(
                "IDENTITY_AMBIGUOUS",
                f"知网上有 {len(accepted)} 篇题名为《{paper.title}》的文献，无法确定是哪一篇。",
                details={"title": paper.title},
            )
        if not accepted or not (accepted[0].locator or accepted[0].url):
            raise CnkiError("DOCUMENT_NOT_FOUND", f"知网上没有找到《{paper.title}》。", details={"title": paper.title})
        located = merge(paper, accepted[0])
        self.catalog.put(located)
        return located

    async def detail(self, op: OperationContext, paper: Paper, refresh: bool = False) -> Paper:
        """The paper's detail page: none when fresh, located first without a link, relocated once on failure."""
        if not refresh and detail_is_fresh(paper):
            return paper
        if not paper.locator and not paper.url:
            paper = await self._located(op, paper)
        try:
            return await self.site.detail(op, paper)
        except Exception as exc:  # noqa: BLE001 - classified below
            error = as_cnki_error(exc)
            if error.fatal or error.code in NOT_RELOCATED:
                raise _wrap(error, paper, "detail") from None
        relocated = await self._located(op, paper)
        try:
            return await self.site.detail(op, relocated)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), relocated, "detail") from None

    async def _located(self, op: OperationContext, paper: Paper) -> Paper:
        try:
            return await self.relocate(op, paper)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), paper, "locate") from None

    async def quality(self, op: OperationContext, paper: Paper) -> Quality | None:
        """Journal evidence for a journal article: cached 7 days (present) or 1 day, one fetch per journal."""
        if "期刊" not in paper.document_type or not paper.source:
            return None
        key = source_key(paper.source)
        memory = self.journals
        while True:
            cached = self.store.data.sources.get(key)
            if cached is not None and journal_is_fresh(cached):
                return cached
            expiry = memory.mismatches.get(key)
            if expiry is not None:
                if expiry > time.monotonic():
                    raise CnkiError(
                        "SOURCE_IDENTITY_UNCONFIRMED",
                        f"期刊页面的名称与来源《{paper.source}》对不上（1 小时内不再重复读取）。",
                        details={"source": paper.source},
                    )
                del memory.mismatches[key]
            if not paper.source_url:
                raise CnkiError("SOURCE_LOCATOR_MISSING", details={"source": paper.source})
            flight = memory.flights.get(key)
            if flight is None:
                break
            try:
                return await asyncio.shield(flight)
            except CnkiError as shared:
                if shared.code not in _OWNER_ONLY_CODES:
                    raise
        future: asyncio.Future[Quality] = asyncio.get_running_loop().create_future()
        memory.flights[key] = future
        try:
            quality = await self.site.journal(op, paper)
        except BaseException as exc:
            error = as_cnki_error(exc)
            if error.code == "SOURCE_IDENTITY_UNCONFIRMED":
                memory.mismatches[key] = time.monotonic() + MISMATCH_MEMORY_SECONDS
            future.set_exception(error)
            future.exception()  # waiters may be none: mark it retrieved
            raise
        else:
            if not quality.observed_at:
                quality = msgspec.structs.replace(quality, observed_at=utc_now_iso())
            self.store.put_source(key, quality)
            future.set_result(quality)
            return quality
        finally:
            memory.flights.pop(key, None)

    async def enhance(self, op: OperationContext, ref: str, *, quality: bool = True, refresh: bool = False) -> None:
        """Detail page, then journal evidence, for one stored record (errors carry the record)."""
        paper = self.store.data.papers.get(ref)
        if paper is None:
            return
        detail = await self.detail(op, paper, refresh)
        current = self.store.data.papers.get(ref, paper)
        if detail.detail_observed_at != current.detail_observed_at:
            current = merge(current, detail)
            self.catalog.put(current)
        if not quality:
            return
        try:
            evidence = await self.quality(op, current)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), current, "journal") from None
        if evidence is not None:
            latest = self.store.data.papers.get(ref, current)
            if latest.quality is None or latest.quality.observed_at != evidence.observed_at:
                self.catalog.put(msgspec.structs.replace(latest, quality=evidence))

    async def enrich(
        self,
        op: OperationContext,
        refs: Sequence[str],
        stage: str,
        *,
        quality: bool = True,
        refresh: bool = False,
        record_errors: bool = True,
    ) -> CnkiError | None:
        """Enhance ``refs`` with CNKI_WORKERS workers; returns the fatal error that stopped it, if any.

        ``record_errors=False`` drops per-record failures (export refreshes details best-effort).
        """

        async def one(ref: str) -> None:
            await self.enhance(op, ref, quality=quality, refresh=refresh)

        return await self.parallel(op, refs, stage, one, record_errors=record_errors)

    # -- title resolution (get_metadata, export_citations, link_references, check_references) --

    async def lookup_titles(
        self, op: OperationContext, titles: Sequence[str], related: Callable[[str, str], bool] | None = None
    ) -> tuple[dict[str, list[str]], dict[str, Problem]]:
        """CNKI's records for each title (10 per grid request, 4 requests at once), stored in the catalogue.

        Returns the refs under each title (rows of one paper merged, in row order; none when CNKI has no
        such title) and a problem for each title whose request failed. ``related`` groups rows the way
        ``SiteBackend.locate`` does. A fatal error is raised once the requests in flight have landed.
        """
        wanted = list(dict.fromkeys(titles))
        batches = [wanted[i : i + TITLES_PER_LOCATE] for i in range(0, len(wanted), TITLES_PER_LOCATE)]
        found: dict[str, list[str]] = {}
        failed: dict[str, Problem] = {}

        async def locate(batch: list[str]) -> None:
            try:
                grouped = await followed(op, self.site.locate(op, batch, related))
            except Exception as exc:  # noqa: BLE001
                error = as_cnki_error(exc)
                if error.fatal:
                    raise
                for title in batch:
                    failed[title] = _title_problem(error, title)
                return
            for title in batch:
                # Two rows of one paper (a repeated listing) merge into one record.
                found[title] = list(dict.fromkeys(p.record_ref for p in self.catalog.upsert(grouped.get(title, []))))

        fatal = await self.parallel(op, batches, "locate", locate, LOCATE_WORKERS)
        if fatal is not None:
            raise fatal
        return found, failed

    async def resolve_titles(self, op: OperationContext, titles: Sequence[str]) -> tuple[list[str], list[Problem]]:
        """Refs for full titles: a unique local match, else CNKI by exact title (``lookup_titles``).

        Per-title failures (DOCUMENT_NOT_FOUND, IDENTITY_AMBIGUOUS, a failed batch) come back as
        problems in title order; a fatal error is raised once the batches in flight have landed.
        """
        wanted: list[str] = []
        seen: set[str] = set()
        for title in titles:
            title = title.strip()
            key = title_key(title)
            if title and key not in seen:
                seen.add(key)
                wanted.append(title)
        found: dict[str, str] = {}
        remote: list[str] = []
        for title in wanted:
            local = self.catalog.by_title(title)
            if len(local) == 1:
                found[title] = local[0]
            else:
                remote.append(title)
        located, failed = await self.lookup_titles(op, remote)
        for title, stored in located.items():
            if len(stored) == 1:
                found[title] = stored[0]
            elif not stored:
                failed[title] = CnkiError(
                    "DOCUMENT_NOT_FOUND", f"知网上没有找到题名为《{title}》的文献。", details={"title": title}
                ).problem()
            else:
                failed[title] = CnkiError(
                    "IDENTITY_AMBIGUOUS",
                    f"知网上有 {len(stored)} 篇题名为《{title}》的文献，请改用 record_ref 指定。",
                    details={"title": title, "record_refs": stored},
                ).problem()
        refs = [found[title] for title in wanted if title in found]
        problems = [failed[title] for title in wanted if title in failed]
        return refs, problems

    async def metadata(
        self,
        op: OperationContext,
        refs: Sequence[str],
        titles: Sequence[str],
        *,
        quality: bool,
        refresh: bool,
        fields: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Resolve, enrich and return records; per-paper failures are recorded and never fail the others."""
        wanted: list[str] = []
        for ref in refs:
            ref = ref.strip()
            if not ref:
                continue
            if ref in self.store.data.papers:
                wanted.append(ref)
            else:
                op.add_error(CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {ref}。", details={"record_ref": ref}))
        fatal: CnkiError | None = None
        if titles:
            try:
                resolved, problems = await self.resolve_titles(op, titles)
            except Exception as exc:  # noqa: BLE001
                fatal = as_cnki_error(exc)
            else:
                wanted += resolved
                for problem in problems:
                    op.add_error(problem)
        unique = list(dict.fromkeys(wanted))
        if fatal is None:
            fatal = await self.enrich(op, unique, "metadata", quality=quality, refresh=refresh)
        records = [select_fields(public_paper(paper), fields) for paper in self.catalog.papers(unique)]
        if fatal is not None:
            if fatal.code == "CANCELLED" and op.cancelled or unreached_with_nothing(fatal, len(records)):
                raise fatal
            op.add_error(fatal)
        return {"records": records}


def _title_problem(error: CnkiError, title: str) -> Problem:
    return CnkiError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={"title": title, "stage": "locate", "cause": error.details},
    ).problem()


def select_fields(data: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """A public record with only the ``fields`` asked for (record_ref and title always); all without any."""
    if not fields:
        return data
    keep = set(fields) | {"record_ref", "title"}
    return {key: value for key, value in data.items() if key in keep}

"""A paper's references, citing papers and similar papers: read from CNKI, kept in the store, paged.

``Relations.page`` answers ``related_papers``: the stored list when it is fresh (30 days for references,
7 for citing and similar papers), else CNKI's citation API asked from inside the work tab through
``SiteBackend.api_get`` (one request per database for the first page, more only for databases whose items
are needed and not read yet). An answer that cannot be the paper's data — a decoy record repeated
across databases or papers, the paper listing itself — is treated as a challenge: never stored, the
person is shown the detail page, the list is asked once more, and then the detail page's own rendered
参考文献/引证文献 lists are read instead (in the 2026 citation area, the list pages its links lead to; an
area with neither is RELATIONS_UNAVAILABLE with a snapshot). Linked items become catalogue records (``record_ref``);
items CNKI links to no record are kept as their citation text. ``Relations.edges`` serves the
snowballing of ``search`` (research.py) and ``export_citations references_of``.

The rules (addresses, answers, decoys, rendered lists, cursor) are pure and live in ``relation_parse``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import (
    CitationResult,
    LocalReply,
    Paper,
    RelatedPaper,
    RelatedResult,
    RelationEntry,
    RelationList,
    RelationPart,
)
from cnki_mcp.ops.jobs import OperationContext, Work
from cnki_mcp.pages.relation_parse import (
    MAX_SIZE,
    RELATION_NAMES,
    SIMILAR,
    SITE_ROOT,
    Answer,
    Ask,
    Entry,
    ListLink,
    NotData,
    Rendered,
    Signatures,
    databases,
    decode_cursor,
    decoy_reason,
    encode_cursor,
    entry_paper,
    page_problem,
    read_answer,
    read_area,
    read_list_page,
    repeated_keys,
    request_url,
    v_token,
)
from cnki_mcp.pages.urls import on_site
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.detail_tab import local_ref, open_detail, resolve_paper
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.exchange import Observation, note_snapshot
from cnki_mcp.store.library import Store, relation_is_fresh, relation_key

log = logging.getLogger(__name__)
T = TypeVar("T")

RENDERED_TIMEOUT = 15.0
DECOY_ROUNDS = 2  # a list asked at most this often while its answers look like a decoy
# Answers that say "the API is not there or not usable now": the detail page's own lists are read instead.
_FALLBACK_CODES = frozenset({"LOCATOR_EXPIRED", "ACCESS_DENIED", "RESOURCE_FAILED", "VERIFICATION_REPEATED",
                             "VERIFICATION_SKIPPED"})


class Asked(msgspec.Struct, frozen=True):
    """What a related_papers call names: the paper (a ref, or a title to locate), the list and where to start."""

    record_ref: str
    title: str
    relation: str
    offset: int = 0


class Decoy(Exception):
    """The answers so far cannot be the paper's data; the text says why."""


def source_view(paper: Paper) -> dict[str, Any]:
    """The source paper as a related_papers answer names it."""
    data = {"record_ref": paper.record_ref, "title": paper.title, "authors": list(paper.authors),
            "year": paper.year, "source": paper.source, "url": paper.url}
    return {k: v for k, v in data.items() if v}


def effective_length(part: RelationPart) -> int:
    """Items of a database that can still be read (its total) or were read before CNKI stopped answering."""
    return max(part.total, len(part.entries)) if part.next_start else len(part.entries)


def list_length(relations: RelationList) -> int:
    return sum(effective_length(part) for part in relations.parts)


def stated_total(relations: RelationList) -> int | None:
    return sum(part.total for part in relations.parts) if relations.stated else None


class Relations:
    """Reading and paging relation lists over one catalogue and site; cheap to create."""

    def __init__(self, engine: Enrichment, site: SiteBackend, signatures: Signatures) -> None:
        self.engine = engine
        self.catalog = engine.catalog
        self.store = engine.store
        self.site = site
        self.signatures = signatures

    # -- the tool ----------------------------------------------------------------------------

    def request(self, record_ref: str, title: str, cursor: str, relation: str) -> Asked:
        """The call's paper and page: a cursor names both (a record_ref given with it must agree)."""
        if not cursor:
            return Asked(local_ref(self.catalog, record_ref, title), title, relation)
        ref, relation, offset = decode_cursor(cursor)
        if record_ref and record_ref != ref:
            raise CnkiError("INVALID_CURSOR", "cursor 属于另一篇文献。", details={"field": "cursor"})
        if ref not in self.store.data.papers:
            raise CnkiError("INVALID_CURSOR", "cursor 指向的文献已不在本地记录中；请重新调用 related_papers。",
                            details={"field": "cursor"})
        return Asked(ref, "", relation, offset)

    def cached(self, asked: Asked, limit: int) -> LocalReply | None:
        """The page from the stored list when it holds every item of it (no request): prefer_cache."""
        if not asked.record_ref:
            return None
        stored = self.stored(asked.record_ref, asked.relation, fresh_only=asked.offset == 0)
        if stored is None or not self.answerable(stored, asked.offset, limit):
            return None
        result = self.result(self.store.data.papers[asked.record_ref], stored, asked.offset, limit)
        return LocalReply(source="cache", requests=0, result=result)

    def work(self, asked: Asked, limit: int, refresh: bool) -> Work:
        """The operation body of a call the store cannot answer."""

        async def run(op: OperationContext) -> RelatedResult:
            paper = await resolve_paper(op, self.engine, asked.record_ref, asked.title)
            return await self.page(op, paper, asked.relation, asked.offset, limit, refresh=refresh)

        return run

    def stored(self, record_ref: str, relation: str, *, fresh_only: bool = True) -> RelationList | None:
        found = self.store.data.relations.get(relation_key(record_ref, relation))
        if found is None or not found.complete or (fresh_only and not relation_is_fresh(found)):
            return None
        return found

    def answerable(self, relations: RelationList, offset: int, limit: int) -> bool:
        """Whether the stored list holds every item of this page (no request needed)."""
        end = offset + limit
        position = 0
        for part in relations.parts:
            if position >= end:
                break
            if part.next_start and position + len(part.entries) < min(end, position + effective_length(part)):
                return False
            position += effective_length(part)
        return True

    async def page(
        self, op: OperationContext, paper: Paper, relation: str, offset: int, limit: int, *, refresh: bool = False
    ) -> RelatedResult:
        """One page of the list; reads what the page needs and keeps it in the store."""
        op.stage("relations", {"relation": relation})
        relations = None if refresh else self.stored(paper.record_ref, relation, fresh_only=offset == 0)
        warnings: list[str] = []
        if relations is None:
            relations, warnings = await self.read(op, paper, relation)
        await self.extend(op, paper, relations, offset + limit)
        return self.result(paper, relations, offset, limit, warnings)

    def result(
        self, paper: Paper, relations: RelationList, offset: int, limit: int, warnings: list[str] | None = None
    ) -> RelatedResult:
        items = [entry for part in relations.parts for entry in part.entries]
        window = items[offset : offset + limit]
        length = list_length(relations)
        notes = list(warnings or [])
        if relations.origin == "page":
            shown = len(items)
            stated = stated_total(relations)
            if stated is not None and stated > shown:
                notes.append(f"知网的接口没有给出可用数据，这里是详情页显示的前 {shown} 条（知网说共 {stated} 条）。")
            length = len(items)
        end = offset + len(window)
        return RelatedResult(
            relation=relations.relation,
            source=source_view(paper),
            total=stated_total(relations),
            offset=offset,
            papers=[self.related(entry, part.database) for part, entry in self._with_parts(relations, offset, limit)],
            next_cursor=encode_cursor(paper.record_ref, relations.relation, end) if end < length and window else None,
            origin=relations.origin,
            warnings=notes,
        )

    @staticmethod
    def _with_parts(relations: RelationList, offset: int, limit: int) -> list[tuple[RelationPart, RelationEntry]]:
        pairs = [(part, entry) for part in relations.parts for entry in part.entries]
        return pairs[offset : offset + limit]

    def related(self, entry: RelationEntry, database: str) -> RelatedPaper:
        paper = self.store.data.papers.get(entry.record_ref) if entry.record_ref else None
        if paper is None:
            return RelatedPaper(record_ref=None, citation=entry.text, database=database)
        return RelatedPaper(
            record_ref=paper.record_ref, title=paper.title, authors=list(paper.authors), year=paper.year,
            source=paper.source, document_type=paper.document_type, url=paper.url, database=database,
        )

    # -- reading -------------------------------------------------------------------------------

    async def read(self, op: OperationContext, paper: Paper, relation: str) -> tuple[RelationList, list[str]]:
        """The list's first page from the API (every database once), else the detail page's lists."""
        warnings: list[str] = []
        try:
            relations = await self._from_api(op, paper, relation)
        except NotData as exc:
            warnings.append(f"知网的{RELATION_NAMES[relation]}接口没有给出可用数据（{exc}），改读详情页上的列表。")
            relations = await self._from_page(op, paper, relation)
        except CnkiError as exc:
            if exc.code not in _FALLBACK_CODES:
                raise
            warnings.append(f"知网的{RELATION_NAMES[relation]}接口不可用（{exc.code}），改读详情页上的列表。")
            relations = await self._from_page(op, paper, relation)
        self.store.put_relation(relations)
        return relations, warnings

    async def _v(self, op: OperationContext, paper: Paper) -> str:
        v = v_token(paper.locator or paper.url)
        if not v:
            located = await self.engine.relocate(op, paper)
            v = v_token(located.locator or located.url)
        if not v:
            raise CnkiError("SOURCE_LOCATOR_MISSING", "这篇文献没有可用的知网详情页链接。", details={"record_ref": paper.record_ref})
        return v

    async def _ask(self, op: OperationContext, paper: Paper, relation: str, v: str, ask: Ask) -> Answer:
        body = await self.site.api_get(op, request_url(relation, v, ask), paper.locator or paper.url)
        site_root = on_site(SITE_ROOT, self.site.site_view().get("host", ""))  # the session's site (abroad: oversea)
        return await asyncio.to_thread(read_answer, body, ask.database, site_root)

    async def _from_api(self, op: OperationContext, paper: Paper, relation: str) -> RelationList:
        v = await self._v(op, paper)
        key = relation_key(paper.record_ref, relation)
        last_reason = ""
        for _round in range(DECOY_ROUNDS):
            epoch = self.site.epoch
            found = self.store.data.relations.get(key)
            relations = found if found is not None and not found.complete and found.origin == "api" else RelationList(
                source_ref=paper.record_ref, relation=relation, complete=False, observed_at=utc_now_iso()
            )
            try:
                await self._first_pages(op, paper, relation, v, relations)
            except Decoy as exc:
                self.store.drop_relation(key)
                last_reason = str(exc)
                log.info("decoy answer for %s (%s): %s", paper.record_ref, relation, last_reason)
                problem = CnkiError("VERIFICATION_REQUIRED", f"知网的接口给出了假数据：{last_reason}")
                try:
                    await self.site.show_decoy(op, problem, paper.locator or paper.url, epoch)
                except CnkiError as skipped:
                    if skipped.code != "VERIFICATION_SKIPPED":
                        raise
                    break
                continue
            except NotData:
                self.store.drop_relation(key)
                raise
            relations.complete, relations.asked, relations.observed_at = True, [], utc_now_iso()
            return relations
        raise NotData(f"回答是假数据：{last_reason}")

    async def _first_pages(self, op: OperationContext, paper: Paper, relation: str, v: str, relations: RelationList) -> None:
        """Every database's first page into ``relations`` (kept in the store after each, so a continue
        after an exhausted budget asks only the rest); Decoy as soon as the answers cannot be the paper's."""
        answers = {database: self._answer_of(relations, database) for database in relations.asked}
        for database in databases(relation):
            if database in relations.asked:
                continue
            ask = Ask(database, 1, MAX_SIZE)
            answer = await self._ask(op, paper, relation, v, ask)
            problem = page_problem(answer, ask, 0)
            if problem:
                raise NotData(problem)
            answers[database] = answer
            reason = decoy_reason(paper, relation, answers, self.signatures.decoys, complete=False)
            if reason:
                self.signatures.decoys.update(repeated_keys(answers))
                raise Decoy(reason)
            if answer.total or answer.entries:
                relations.parts.append(self._part(database, answer))
            relations.asked.append(database)
            self.store.put_relation(relations)
        reason = decoy_reason(paper, relation, answers, self.signatures.decoys)
        if reason:
            raise Decoy(reason)
        other = self.signatures.other_paper(paper.record_ref, relation, answers)
        if other:
            raise Decoy(f"与另一篇文献（{other}）的回答完全相同")

    def _answer_of(self, relations: RelationList, database: str) -> Answer:
        """A database answered before (a resumed list), as far as the decoy checks need it."""
        for part in relations.parts:
            if (part.database or SIMILAR) == database:
                return Answer(total=part.total, entries=[self._entry_of(entry) for entry in part.entries])
        return Answer(total=0, entries=[])

    def _part(self, database: str, answer: Answer) -> RelationPart:
        read = len(answer.entries) + answer.unreadable
        return RelationPart(
            database="" if database == SIMILAR else database,
            total=answer.total,
            entries=self._entries(answer.entries, utc_now_iso()),
            next_start=2 if read < answer.total and read else 0,
            size=MAX_SIZE if read >= MAX_SIZE or read >= answer.total else max(1, read),
        )

    def _entries(self, entries: list[Entry], observed_at: str) -> list[RelationEntry]:
        out: list[RelationEntry] = []
        linked = [entry for entry in entries if entry.url and entry.title]
        stored = iter(self.catalog.upsert(entry_paper(entry, observed_at) for entry in linked))
        for entry in entries:
            if entry.url and entry.title:
                out.append(RelationEntry(record_ref=next(stored).record_ref))
            else:
                out.append(RelationEntry(text=entry.text))
        return out

    async def extend(self, op: OperationContext, paper: Paper, relations: RelationList, end: int) -> None:
        """Read further pages of the databases whose items up to position ``end`` are not read yet."""
        if relations.origin != "api" or self.answerable(relations, 0, end):
            return
        v = await self._v(op, paper)
        position = 0
        for part in relations.parts:
            if position >= end:
                break
            while part.next_start and len(part.entries) < min(end - position, effective_length(part)):
                await self._more(op, paper, relations.relation, v, part)
                self.store.put_relation(relations)  # kept at once: a continue does not ask this page again
            position += effective_length(part)

    async def _more(self, op: OperationContext, paper: Paper, relation: str, v: str, part: RelationPart) -> None:
        """The next page of one database (``start`` counting pages, or items where CNKI counts them so)."""
        known = len(part.entries)
        database = part.database or databases(relation)[0]
        start = known + 1 if part.by_record else part.next_start
        ask = Ask(database, start, part.size or MAX_SIZE)
        answer = await self._ask(op, paper, relation, v, ask)
        problem = page_problem(answer, ask, known)
        if problem or not answer.entries:
            if problem:
                log.info("a page of %s ends the list: %s", database, problem)
            part.next_start = 0
            return
        keys = {self._key(entry) for entry in part.entries}
        fresh = [entry for entry in answer.entries if entry.key not in keys]
        if len(fresh) < len(answer.entries):
            if part.by_record or start == 1:
                part.next_start = 0  # the site repeats itself: nothing more to read
                return
            part.by_record = True  # the page repeats items already read: ``start`` counts items here
        part.entries.extend(self._entries(fresh, utc_now_iso()))
        if len(part.entries) >= part.total:
            part.next_start = 0
        else:
            part.next_start = len(part.entries) + 1 if part.by_record else start + 1

    def _entry_of(self, entry: RelationEntry) -> Entry:
        paper = self.store.data.papers.get(entry.record_ref) if entry.record_ref else None
        if paper is None:
            return Entry(text=entry.text)
        return Entry(title=paper.title, authors=list(paper.authors), url=paper.url)

    def _key(self, entry: RelationEntry) -> str:
        return self._entry_of(entry).key

    async def _from_page(self, op: OperationContext, paper: Paper, relation: str) -> RelationList:
        """The detail page's own list (references and citing papers; at most what it shows), or in the 2026
        citation area the page its link leads to; RELATIONS_UNAVAILABLE with a snapshot when neither shows."""
        if relation == "similar":
            raise CnkiError("RELATIONS_UNAVAILABLE", details={"relation": relation})
        tab, bound = await open_detail(op, self.engine, self.site, paper)
        try:
            area: Rendered | ListLink = await self._shown(op, tab, relation, read_area, "relations-area")
            if isinstance(area, ListLink):
                await self.site.navigate(op, tab, area.url, RENDERED_TIMEOUT, until="commit")
                rendered = await self._shown(op, tab, relation, read_list_page, "relations-list")
            else:
                rendered = area
        finally:
            with contextlib.suppress(CnkiError):
                await self.site.close_tab(tab)
        now = utc_now_iso()
        parts = [
            RelationPart(database=database, total=count if count is not None else len(entries),
                         entries=self._entries(entries, now))
            for database, count, entries in rendered.parts
            if entries or count
        ]
        stated = all(count is not None for _, count, _ in rendered.parts)
        return RelationList(source_ref=bound.record_ref or paper.record_ref, relation=relation, parts=parts,
                            origin="page", stated=stated, observed_at=now)

    async def _shown(
        self, op: OperationContext, tab: Tab, relation: str, read: Callable[[str, str, str], T | None], kind: str
    ) -> T:
        """What ``read`` finds on the live tab; RELATIONS_UNAVAILABLE (with the page as a snapshot) when it
        finds nothing in time."""
        last: list[Observation] = []

        def accept(seen: Observation) -> T | None:
            last[:] = [seen]
            return read(seen.html, relation, seen.url)

        try:
            return await self.site.wait_page(op, tab, accept, RENDERED_TIMEOUT)
        except CnkiError as exc:
            if exc.code not in ("CONTENT_NOT_READY", "PARSER_UNSUPPORTED"):
                raise
            problem = CnkiError("RELATIONS_UNAVAILABLE", details={"relation": relation})
            if last:
                note_snapshot(problem, await self.site.snapshot(kind, last[0].html, last[0].url, tab))
            raise problem from None

    # -- the graph for search and export ------------------------------------------------------------

    async def edges(self, op: OperationContext, paper: Paper, relation: str, *, live: bool = False) -> list[str]:
        """The record refs of a paper's linked references or citing papers (stored when fresh, else read)."""
        relations = None if live else self.stored(paper.record_ref, relation)
        if relations is None:
            relations, _ = await self.read(op, paper, relation)
        return [entry.record_ref for part in relations.parts for entry in part.entries if entry.record_ref]


def stored_references(store: Store, record_ref: str) -> tuple[list[str], list[str]]:
    """export_citations ``references_of``: a paper's stored reference list as (record refs in CNKI's order,
    citation texts of the items CNKI links to no record)."""
    if record_ref not in store.data.papers:
        raise CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {record_ref}。", details={"record_ref": record_ref})
    stored = store.data.relations.get(relation_key(record_ref, "references"))
    if stored is None or not stored.complete:
        raise CnkiError("REFERENCES_NOT_READ", details={"record_ref": record_ref})
    entries = [entry for part in stored.parts for entry in part.entries]
    return [e.record_ref for e in entries if e.record_ref], [e.text for e in entries if not e.record_ref and e.text]


def with_unlinked(result: CitationResult, unlinked: list[str]) -> CitationResult:
    """An export of a reference list, with the items that have no record listed as CNKI gives them."""
    if unlinked:
        result.unlinked = list(unlinked)
        result.warnings.append(f"参考文献表中有 {len(unlinked)} 条知网没有链接到记录，未按格式导出，原样列在 unlinked 中。")
    return result

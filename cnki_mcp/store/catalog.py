"""The paper catalogue of one store: the identity index, merging observations, and title lookup.

A record (``Paper``) is found again by its identity keys (CNKI file name, DOI, title with authors
or source …) and by its title key. ``upsert`` folds every new observation into the stored record it
belongs to, or stores a new one under a stable ``record_ref``; a listing never overrides what a detail
page said (``merge``). One ``Catalog`` per open store, owned by the app.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

import msgspec

from cnki_mcp.core.clock import parse_utc
from cnki_mcp.core.identity import REF_PREFIX, detail_matches, identity_keys, record_ref_for, same_paper
from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import date_numbers, title_key
from cnki_mcp.store.library import Store


class PaperIndex:
    """Refs by identity key and by title key: lookups in research.db's index (``paper_keys``, the papers'
    ``title_key``), kept in step by every write of a paper. Lookups re-check the stored paper."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, paper: Paper) -> None:
        """Nothing to do: a paper's keys are written with the paper (kept for callers)."""

    def candidates(self, paper: Paper) -> set[str]:
        return self._store.data.papers.refs_with_keys(identity_keys(paper))

    def by_title(self, title: str) -> list[str]:
        """Stored refs whose current title has this title key, sorted."""
        key = title_key(title)
        papers = self._store.data.papers
        found = []
        for ref in sorted(papers.refs_with_title(key)):
            paper = papers.get(ref)
            if paper is not None and title_key(paper.title) == key:
                found.append(ref)
        return found


_LIST_OR_DETAIL = ("title", "authors", "source", "publication_date")
_ALWAYS = (
    "source_url", "document_type", "doi", "dbcode", "dbname", "filename", "url", "locator",
    "abstract", "excerpt", "sentence", "volume", "issue", "pages", "keywords", "institutions", "funds", "clc_codes", "online_first",
)


def _later(a: str, b: str) -> bool:
    """Whether timestamp ``a`` is later than ``b`` (an unparsable or empty one is earliest)."""
    moment_a, moment_b = parse_utc(a), parse_utc(b)
    if moment_a is None:
        return False
    return moment_b is None or moment_a > moment_b


def _coarser(fresh: str, old: str) -> bool:
    """Whether date ``fresh`` is the same date as ``old`` told less precisely (2024 against 2024-03-05)."""
    a, b = date_numbers(fresh), date_numbers(old)
    return bool(a) and len(a) < len(b) and b[: len(a)] == a


def merge(old: Paper, fresh: Paper) -> Paper:
    """``fresh`` folded into ``old``: a listing never overrides a detail page's bibliography.

    Title, authors, source, date and year come from a detail observation (or from a listing while no
    detail was read); the other fields take any non-empty fresh value; counts and quality any non-null one.
    """
    out = msgspec.structs.replace(old)
    if fresh.detail_observed_at or not old.detail_observed_at:
        for name in _LIST_OR_DETAIL:
            value = getattr(fresh, name)
            if value:
                setattr(out, name, value)
        if _coarser(fresh.publication_date, old.publication_date):
            out.publication_date = old.publication_date  # a detail page's "2024(3)" says less than the listing's day
        if fresh.year > 0:
            out.year = fresh.year
    for name in _ALWAYS:
        value = getattr(fresh, name)
        if value:
            setattr(out, name, value)
    for name in ("cited", "downloaded", "quality"):
        value = getattr(fresh, name)
        if value is not None:
            setattr(out, name, value)
    if _later(fresh.listed_at, old.listed_at):
        out.listed_at = fresh.listed_at
    if _later(fresh.detail_observed_at, old.detail_observed_at):
        out.detail_observed_at = fresh.detail_observed_at
        out.detail_parser = fresh.detail_parser
    out.record_ref = old.record_ref
    return out


class Catalog:
    """The records of one store with their identity index (built lazily, kept in step on every write)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = PaperIndex(store)

    def put(self, paper: Paper) -> None:
        """Store ``paper`` under its ref (its index keys are written with it)."""
        self.store.put_paper(paper)

    def by_title(self, title: str) -> list[str]:
        """Stored refs with exactly this title (by title key), sorted."""
        return self.index.by_title(title)

    def papers(self, refs: Iterable[str]) -> list[Paper]:
        """The stored records of ``refs`` that exist, in order."""
        papers = self.store.data.papers
        return [paper for paper in map(papers.get, refs) if paper is not None]

    def upsert(self, papers: Iterable[Paper]) -> list[Paper]:
        """Store each observation, merged into the same stored paper when identity says so."""
        stored_papers = self.store.data.papers
        out: list[Paper] = []
        for incoming in papers:
            candidates = self.index.candidates(incoming)
            if incoming.record_ref:
                candidates.add(incoming.record_ref)
            match: Paper | None = None
            for ref in sorted(candidates):
                stored = stored_papers.get(ref)
                if stored is None:
                    continue
                if (ref == incoming.record_ref and detail_matches(stored, incoming)) or same_paper(stored, incoming):
                    match = stored
                    break
            if match is not None:
                result = merge(match, incoming)
            else:
                result = msgspec.structs.replace(incoming)
                ref = incoming.record_ref or record_ref_for(incoming)
                if ref in stored_papers:
                    ref = REF_PREFIX + secrets.token_hex(12)
                result.record_ref = ref
            self.put(result)
            out.append(result)
        return out

    def resolve_local(self, record_refs: list[str], titles: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
        """Refs given directly plus titles that match exactly one stored record."""
        refs: list[str] = []
        problems: list[dict[str, Any]] = []
        for ref in record_refs:
            if ref in self.store.data.papers:
                refs.append(ref)
            else:
                problems.append({"code": "RECORD_NOT_FOUND", "message": f"本地没有记录 {ref}。", "details": {"record_ref": ref}})
        for title in titles:
            matches = self.by_title(title)
            if len(matches) == 1:
                refs.append(matches[0])
            elif matches:
                problems.append({
                    "code": "IDENTITY_AMBIGUOUS",
                    "message": f"本地有 {len(matches)} 篇题名为《{title}》的文献，请改用 record_ref。",
                    "details": {"title": title, "record_refs": sorted(matches)},
                })
            else:
                problems.append({"code": "DOCUMENT_NOT_FOUND", "message": f"本地没有题名为《{title}》的文献。", "details": {"title": title}})
        return refs, problems

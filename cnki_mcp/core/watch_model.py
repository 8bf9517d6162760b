"""Topic watches (the ``watch`` tool, ``cnki-mcp watch run``): what the store keeps of a watch, and what a run answers.

Beside ``core.model`` (near its size limit); the store's ``watches`` section holds ``Watch``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from cnki_mcp.core import model  # the module, not its names: core.model imports this one for StoreData

KNOWN_KEPT = 2000  # refs a watch remembers, newest first: the listing is read only until the first of them


class Watch(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A search watched: the tool and its arguments as checked at ``add`` (a concept search's plan fixed into
    ``concept_groups``, so every run asks CNKI the same), and the papers already seen."""

    name: str
    tool: str
    arguments: dict[str, Any] = {}
    known: list[str] = []
    # Told by a run that stopped before a known paper (WATCH_GAP): they do not end a listing, so later runs read
    # on past them into the gap; once a run reaches ``known`` again they join it. Kept as many as ``known``.
    told: list[str] = []
    baseline_at: str = ""  # the first run; empty until it happened
    created_at: str = ""
    last_run_at: str = ""


class WatchPaper(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A new paper of a run: its listing data, its journal's tiers and the listings that found it."""

    record_ref: str
    title: str = ""
    authors: list[str] = []
    source: str = ""
    publication_date: str = ""
    url: str = ""
    tiers: list[str] = []
    matched: list[str] = []


class WatchRun(msgspec.Struct, kw_only=True):
    """One run of one watch: on the first (``baseline``) how many papers it found, later the new ones."""

    name: str
    baseline: bool = False
    found: int = 0
    total: int | None = None  # what CNKI's listing said it holds (its first listing)
    new: list[WatchPaper] = []
    warnings: list[model.Problem] = []  # WATCH_GAP, WATCH_MEMORY_FULL: the run completed, but not everything was seen


class WatchView(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A watch as ``list`` shows it."""

    name: str
    tool: str
    arguments: dict[str, Any] = {}
    known: int  # how many papers it remembers (always shown)
    gap: bool = False  # a run stopped before the papers it knew: later runs still look for the papers between
    baseline_at: str = ""
    last_run_at: str = ""

    @classmethod
    def of(cls, watch: Watch) -> WatchView:
        return cls(name=watch.name, tool=watch.tool, arguments=watch.arguments, known=len(watch.known) + len(watch.told), gap=bool(watch.told),
                   baseline_at=watch.baseline_at, last_run_at=watch.last_run_at)


class WatchList(msgspec.Struct, kw_only=True):
    """``list``, and what ``add`` and ``remove`` leave."""

    watches: list[WatchView]

"""Topic watches (the ``watch`` tool, ``cnki-mcp watch run``): what the store keeps of a watch, and what ``list`` shows.

Beside ``core.model`` (near its size limit); the store's ``watches`` section holds ``Watch``.
"""

from __future__ import annotations

from typing import Any

import msgspec

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

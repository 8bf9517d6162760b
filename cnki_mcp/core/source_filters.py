"""What a search reports about its rows' sources: the 来源类别 CNKI applied (``source_categories``) and the
rows of sources other than those the caller named exactly, dropped (research/sources.py decides both).

``SourceFindings`` is a base of ``SearchSummary`` and ``SearchRecord``: the answer says it, and a cached answer
rebuilt from the record says it again.
"""

from __future__ import annotations

import msgspec


class CategoryPick(msgspec.Struct, omit_defaults=True):
    """One 来源类别 applied: its name, the facet code sent, and its papers in the first listing per the panel
    (0: the panel did not list it there)."""

    name: str
    code: str
    count: int = 0


class SourceCategories(msgspec.Struct, omit_defaults=True, kw_only=True):
    """How a search's ``source_categories`` were applied through CNKI's 来源类别 group (``LYBSM``)."""

    requested: list[str]
    # the listing's total fitted the panel's counts of the applied categories (CNKI narrowed it); False
    # until checked, or with ``note`` when CNKI's answer could not show it (always written out)
    confirmed: bool
    applied: list[CategoryPick] = []
    not_applied: list[str] = []  # not in the panel and no known code: nothing of them in the first listing
    note: str = ""


class SourceFindings(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A search's findings about sources (every field keyword-only, so a subclass may add required ones)."""

    # source_categories: what CNKI's 来源类别 group applied
    source_categories: SourceCategories | None = None
    # sources the caller named exactly (a source leaf with match exact, LY= …): rows CNKI listed from others, dropped
    excluded_other_sources: int = 0
    other_sources: list[str] = []  # their names (the first few)

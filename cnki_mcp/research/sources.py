"""What a search asks of its rows' sources: the 来源类别 CNKI applies (``source_categories``) and the
journals the caller named exactly (rows of other sources dropped and counted).

来源类别 go through CNKI's own left panel, never a local filter: the panel's ``LYBSM`` group of the first
listing (one request) gives each category's code and count; the picks narrow every listing of the search
like a ``facet_filters`` pick; the first narrowed page's total must fit the counts, else CNKI did not
apply them (SOURCE_CATEGORY_NOT_APPLIED, never rows said to be narrowed).

Named sources: CNKI's ``LY=`` (and a structured ``source`` leaf with ``match: exact``) also lists journals
of similar names, so where every way an expression can match requires one of the named sources, a row of
another source is not an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.source_filters import CategoryPick, SourceCategories
from cnki_mcp.core.text import source_key
from cnki_mcp.pages.facet_parse import FacetGroup
from cnki_mcp.research.expert import Clause, Node, Word, WordOp, parse
from cnki_mcp.site.facet_query import SOURCE_CATEGORIES, facet_code, facet_of_group, group_ids, names_category
from cnki_mcp.site.grid_query import CompiledQuery, Condition

CATEGORY_FACET = "source_category"
CATEGORY_GROUP = group_ids(CATEGORY_FACET)[0]
NO_TOTAL = "知网这一页没有给出结果总数，无法核对来源类别是否已应用；分组中各类别的篇数见 applied。"
OTHER_SOURCES_SHOWN = 10


# --- 来源类别 -----------------------------------------------------------------------------------------


def categories_applied(names: Sequence[str], groups: Mapping[str, FacetGroup]) -> SourceCategories:
    """The categories ``names`` as the panel's 来源类别 group of the first listing offers them: an entry of
    that name (or of the category's known code) gives its code and count; a category the panel does not list
    is sent by its known code (none of it in that listing); one without either cannot be sent.
    SOURCE_CATEGORY_ABSENT when none can."""
    entries = [
        entry for group in groups.values() if facet_of_group(group.ident) == CATEGORY_FACET for entry in group.entries
    ]
    view = SourceCategories(requested=list(names), confirmed=False)
    for name in names:
        known = SOURCE_CATEGORIES[name]
        entry = next((e for e in entries if names_category(e.name, name) or (known and e.value == known)), None)
        if entry is not None:
            view.applied.append(CategoryPick(name=name, code=facet_code(entry.field, entry.value), count=entry.count))
        elif known:
            view.applied.append(CategoryPick(name=name, code=facet_code(CATEGORY_GROUP, known)))
        else:
            view.not_applied.append(name)
    if not view.applied:
        raise CnkiError(
            "SOURCE_CATEGORY_ABSENT",
            f"知网的来源类别分组中没有 {'、'.join(names)}（该检索的结果里没有这类文献，或知网换了名称），没有检索。",
            details={"requested": list(names), "offered": [entry.name for entry in entries]},
        )
    return view


def category_filters(filters: Mapping[str, list[str]], view: SourceCategories | None) -> dict[str, list[str]]:
    """The search's facet filters with the applied categories' codes."""
    if view is None:
        return dict(filters)
    return {**filters, CATEGORY_FACET: [pick.code for pick in view.applied]}


def confirm_categories(view: SourceCategories, total: int | None) -> None:
    """The first narrowed page checked against the panel: a total above what the applied categories hold
    means CNKI did not narrow (SOURCE_CATEGORY_NOT_APPLIED); no total leaves it unconfirmed, said in ``note``."""
    if total is None:
        view.note = NO_TOTAL
        return
    held = sum(pick.count for pick in view.applied)
    if total > held:
        raise CnkiError(
            "SOURCE_CATEGORY_NOT_APPLIED",
            f"知网给出 {total} 条结果，而所选来源类别在分组中共 {held} 篇：知网没有按来源类别筛选，结果没有返回。",
            details={"total": total, "held": held, "applied": [pick.code for pick in view.applied]},
        )
    view.confirmed = True


# --- named sources ------------------------------------------------------------------------------------


def named_sources(listing: CompiledQuery | None) -> frozenset[str] | None:
    """The sources (``source_key``) a row of a search keeping CNKI's order must come from, or None: a condition
    tree's or a professional-search expression's; a research search or a 句子检索 names none."""
    if listing is None or listing.sentence is not None:
        return None
    return sources_of_expert(listing.expert) if listing.expert else sources_of_branches(listing.branches)


def sources_of_branches(branches: Sequence[Sequence[Condition]]) -> frozenset[str] | None:
    """The sources a row of a structured query must come from: every branch names one exactly (a source leaf
    with match exact, not negated), else None (some way to match names none)."""
    if not branches:
        return None
    named: set[str] = set()
    for branch in branches:
        mine = {c.value for c in branch if c.field == "source" and c.match == "exact" and not c.negated}
        if not mine:
            return None
        named |= mine
    return frozenset(source_key(name) for name in named)


def sources_of_expert(expression: str) -> frozenset[str] | None:
    """The sources a row of a professional-search expression must come from (its ``LY=`` conditions that
    every way to match needs), else None."""
    named = _required(parse(expression).tree)
    return None if named is None else frozenset(source_key(name) for name in named)


def _required(node: Node) -> set[str] | None:
    if isinstance(node, Clause):
        if node.field.upper() != "LY" or node.op != "=" or not isinstance(node.value, (Word, WordOp)):
            return None
        return _words(node.value)
    left, right = _required(node.left), _required(node.right)
    if node.op == "AND":
        if left is not None and right is not None:
            return left & right
        return left if left is not None else right
    if node.op == "OR":
        return left | right if left is not None and right is not None else None
    return left  # NOT: the left side's sources


def _words(value: Word | WordOp) -> set[str]:
    if isinstance(value, Word):
        return {value.text}
    if value.op == "-":
        return _words(value.left)
    return _words(value.left) | _words(value.right)


def from_named(source: str, named: frozenset[str] | None) -> bool:
    """Whether a row's source is one the caller named (always, when none was named)."""
    return named is None or source_key(source) in named

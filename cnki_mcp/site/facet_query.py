"""The request language of CNKI's left facet panel (分组): which groups a facet name asks for, the codes
``search_facets`` hands out, the ``SCDBGroup`` that narrows a listing, and the ``group/result`` form.

Pure: no I/O. The panel is asked with ``POST kns8s/group/result`` (``queryJson`` of the listing,
``groupIds`` joined by commas); a pick from it narrows the grid with a QueryJson group ``SCDBGroup`` whose
child group per facet (``Key`` = the panel's ``groupid``, e.g. ``ZYZT|||CYZT``) ORs its picks
(``Logic`` 1), facets ANDed, as the captured 2025-06 refinement request does (``SearchFrom`` 2).

A code is ``FIELD=VALUE``: the panel's ``dd[field]`` and the checkbox's ``value`` (one facet may hold
several fields: 主要主题 ``ZYZT`` and 次要主题 ``CYZT``). A bare value means the facet's first field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.tool_args import FACET_CODES_MAX, FACET_NAMES, FACETS

# Facet name → the panel's group ids: the one asked for first, then other ids seen for it.
# Ids from public clients of kns8s/group/result (azazo1/cnki-cli; a second scraper names 期刊 QK).
_GROUP_IDS: dict[str, tuple[str, ...]] = {
    "year": ("YE",),
    "subject": ("CCL",),
    "topic": ("ZYZT|||CYZT",),
    "source": ("WXLY", "QK", "LY"),
    "author": ("AUC|||HWZZ", "AU"),
    "institution": ("AFC",),
    "fund": ("FUC",),
    "doc_type": ("WXLX2", "WXLX"),
    "source_category": ("LYBSM",),  # 来源类别 (azazo1/cnki-cli's group list)
}
# Facet name → (label, group ids), in the tools' order.
FACET_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {name: (label, _GROUP_IDS[name]) for name, label in FACETS.items()}
SCDB_KEY = "SCDBGroup"
SEARCH_FROM_GROUP = 2  # QueryJson SearchFrom of a listing narrowed in the left panel
MAX_CODES = FACET_CODES_MAX
MAX_CODE_CHARS = 200
GROUP_PATH = "/group/result"
# 来源类别: the names a caller may give, each with the checkbox value public clients saw for it on the
# professional/advanced forms and the results panel (hushiliang2009, cookjohn; none seen for SCI and EI: those
# are found by name in the panel). Aliases a caller may write for a name, upper-cased.
SOURCE_CATEGORIES: dict[str, str] = {
    "北大核心": "P01", "CSSCI": "P0209", "CSCD": "P0210", "WJCI": "P12", "AMI": "P13", "SCI": "", "EI": "",
}
_CATEGORY_ALIASES = {"中文核心": "北大核心", "北大中文核心": "北大核心", "中文核心期刊": "北大核心"}


class FacetPick(msgspec.Struct, frozen=True):
    """The picks of one field of one facet (ORed): CNKI's child group of ``SCDBGroup``."""

    group: str  # the panel's groupid, e.g. ZYZT|||CYZT
    field: str  # dd[field], e.g. CYZT
    values: tuple[str, ...]


def group_ids(facet: str) -> tuple[str, ...]:
    return FACET_GROUPS[facet][1]


def fields_of(facet: str) -> list[str]:
    """Every field the facet's group ids name (``ZYZT|||CYZT`` → ZYZT, CYZT), first id first."""
    fields: list[str] = []
    for ident in group_ids(facet):
        for part in ident.split("|||"):
            if part and part not in fields:
                fields.append(part)
    return fields


def facet_of_group(ident: str) -> str | None:
    """The facet a panel groupid belongs to, or None for a group no facet asks for (研究层次, OA …)."""
    for name, (_label, idents) in FACET_GROUPS.items():
        if ident in idents:
            return name
    return None


def facet_code(field: str, value: str) -> str:
    return f"{field}={value}"


def read_code(facet: str, code: str) -> tuple[str, str]:
    """(field, value) of a code of ``facet``; INVALID_FACET_FILTER when it cannot be one."""
    if facet not in FACET_GROUPS:
        raise CnkiError(
            "INVALID_FACET", f"未知的分组：{facet}；可选 {'、'.join(FACET_NAMES)}。", details={"facet": facet}
        )
    text = code.strip() if isinstance(code, str) else ""
    if not text or len(text) > MAX_CODE_CHARS:
        raise CnkiError(
            "INVALID_FACET_FILTER", f"{facet} 的 code 须为 1–{MAX_CODE_CHARS} 字。", details={"facet": facet}
        )
    fields = fields_of(facet)
    field, sep, value = text.partition("=")
    if not sep:
        return fields[0], text
    if field not in fields or not value.strip():
        raise CnkiError(
            "INVALID_FACET_FILTER",
            f"{code} 不是 {facet} 分组的 code（应为 search_facets 给出的 {'/'.join(fields)}=…）。",
            details={"facet": facet, "code": code},
        )
    return field, value.strip()


def facet_picks(filters: Mapping[str, Sequence[str]]) -> tuple[FacetPick, ...]:
    """``facet_filters`` as the picks the grid sends, facets in a fixed order, codes in the given order."""
    picks: list[FacetPick] = []
    for facet in FACET_NAMES:
        codes = filters.get(facet)
        if codes is None:
            continue
        if not 1 <= len(codes) <= MAX_CODES:
            raise CnkiError(
                "INVALID_FACET_FILTER", f"{facet} 须给出 1–{MAX_CODES} 个 code。", details={"facet": facet}
            )
        by_field: dict[str, list[str]] = {}
        for code in codes:
            field, value = read_code(facet, code)
            values = by_field.setdefault(field, [])
            if value not in values:
                values.append(value)
        for field, values in by_field.items():
            picks.append(FacetPick(group=_group_of(facet, field), field=field, values=tuple(values)))
    unknown = sorted(set(filters) - set(FACET_GROUPS))
    if unknown:
        read_code(unknown[0], "")  # raises INVALID_FACET
    return tuple(picks)


def _group_of(facet: str, field: str) -> str:
    for ident in group_ids(facet):
        if field in ident.split("|||"):
            return ident
    return field


def scdb_group(picks: Sequence[FacetPick]) -> dict[str, Any]:
    """CNKI's ``SCDBGroup``: one child group per facet (its fields' picks ORed), the facets ANDed."""
    children: dict[str, dict[str, Any]] = {}
    for pick in picks:
        child = children.setdefault(pick.group, {"Key": pick.group, "Title": "", "Logic": 0, "Items": [], "ChildItems": []})
        for value in pick.values:
            child["Items"].append({
                "Key": value, "Title": value, "Logic": 1, "Field": pick.field, "Operator": "DEFAULT",
                "Value": value, "Value2": "", "Name": pick.field,
            })
    return {"Key": SCDB_KEY, "Title": "", "Logic": 0, "Items": [], "ChildItems": list(children.values())}


def with_facets(query_json: Mapping[str, Any], picks: Sequence[FacetPick]) -> dict[str, Any]:
    """A copy of a listing's QueryJson narrowed by ``picks`` (unchanged without any); a first page is
    asked as the panel asks it (SearchFrom 2)."""
    narrowed = copy.deepcopy(dict(query_json))
    if not picks:
        return narrowed
    groups = narrowed["QNode"]["QGroup"]
    groups[:] = [group for group in groups if not (isinstance(group, dict) and group.get("Key") == SCDB_KEY)]
    groups.append(scdb_group(picks))
    if narrowed.get("SearchFrom") == 1:
        narrowed["SearchFrom"] = SEARCH_FROM_GROUP
    return narrowed


def group_url(grid_url: str) -> str:
    """``…/kns8s/brief/grid`` → ``…/kns8s/group/result`` (same host and prefix: a remote-access route too)."""
    head, sep, _tail = grid_url.rpartition("/brief/grid")
    if not sep:
        raise CnkiError("QUERY_TEMPLATE_UNSUPPORTED", "检索请求的地址不是 brief/grid，无法推出分组地址。", details={"url": grid_url})
    return head + GROUP_PATH


def group_form(template_form: Mapping[str, str], query_json: Mapping[str, Any], idents: Sequence[str]) -> dict[str, str]:
    """The ``group/result`` form: the listing's queryJson, the group ids, and the template's aside."""
    return {
        "queryJson": json.dumps(query_json, ensure_ascii=False, separators=(",", ":")),
        "groupIds": ",".join(idents),
        "aside": str(template_form.get("aside", "")),
        "subject": "",
        "language": "",
        "uniplatform": "",
    }


def source_category(name: str) -> str:
    """The category ``name`` means (``SOURCE_CATEGORIES``' spelling; case and spaces aside, aliases
    allowed); INVALID_INPUT naming the known ones otherwise."""
    text = "".join(str(name).split()).upper()
    for known in SOURCE_CATEGORIES:
        if text == known.upper():
            return known
    if text in _CATEGORY_ALIASES:
        return _CATEGORY_ALIASES[text]
    raise CnkiError(
        "INVALID_INPUT", f"未知的来源类别：{name}；可选 {'、'.join(SOURCE_CATEGORIES)}。",
        details={"field": "source_categories", "value": str(name), "known": list(SOURCE_CATEGORIES)},
    )


def names_category(shown: str, category: str) -> bool:
    """Whether a panel entry's name ``shown`` is ``category`` (``SCI`` is ``SCI`` or ``SCI来源期刊``, never
    ``SCIE``)."""
    text, want = "".join(shown.split()).upper(), category.upper()
    return text == want or (text.startswith(want) and not text[len(want)].isascii())

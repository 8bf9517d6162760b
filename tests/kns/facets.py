"""The left facet panel (分组) of the simulator: ``POST kns8s/group/result`` and the ``SCDBGroup`` refinement.

Built from ``shared/cnki-samples/azazo1-group-facets-fragment.trimmed.html`` (``#divGroup dl[groupid]``,
``dt.tit b``, ``dd[field][tit] ul li input[type=checkbox][value][text]`` + ``span`` count) and the group
ids public clients send (azazo1/cnki-cli: YE, CCL, ZYZT|||CYZT, WXLY, AUC|||HWZZ, AFC, FUC, WXLX2; a second
scraper names 期刊 QK). The answer lists the groups of ``groupIds`` in the order asked (every group when it
is empty), entries by count (most first), years newest first as CNKI shows them.

LYBSM (来源类别, azazo1/cnki-cli's group list) counts a journal paper under its journal's tags (``CATEGORIES``).
What a paper counts under, per dd field (value = the checkbox's code, text = the name shown):
YE the year; CCL the 学科 of its first CLC class (letter → an invented CCL code and name); ZYZT its first
two keywords, CYZT the others; WXLY its source (code = the source key); AUC its authors, AFC its
institutions, FUC its funds (codes = a stable hash of the name); WXLX2 its document type.

A refinement (``SCDBGroup`` in the grid's QueryJson, the captured 2025-06 request) keeps a paper when,
for every child group, one of its items (``Field`` + ``Value``) matches: items of one group ORed,
groups ANDed. Scenario ``facet_panel`` (README) varies the answer's shape.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from html import escape
from typing import Any

from .corpus import JOURNALS, Paper

PANEL_STYLES = ("full", "folded", "aliases", "hidden_more", "unknown", "no_funds")
DEFAULT_GROUPS = ("YE", "CCL", "ZYZT|||CYZT", "WXLY", "AUC|||HWZZ", "AFC", "FUC", "WXLX2")
TITLES = {
    "YE": "年度", "CCL": "学科", "ZYZT|||CYZT": "主题", "WXLY": "文献来源", "QK": "期刊", "AUC|||HWZZ": "作者",
    "AFC": "机构", "FUC": "基金", "WXLX2": "文献类型", "WXLX": "文献类型", "LYBSM": "来源类别",
}
FIELD_TITLES = {"ZYZT": "主要主题", "CYZT": "次要主题", "AUC": "作者", "HWZZ": "海外作者"}
# The "aliases" style answers these groups under the other ids clients report.
ALIASES = {"WXLY": "QK", "WXLX2": "WXLX"}
SUBJECTS = {
    "D": ("G115", "法学"), "F": ("J152", "经济学"), "G": ("H127", "教育学"), "Q": ("A006", "生物学"),
    "R": ("E057", "临床医学"), "T": ("I140", "自动化技术"), "U": ("C034", "交通运输"), "X": ("B027", "环境科学"),
}
# 来源类别 (LYBSM): a journal's tags as the category entries it counts under, (checkbox value, name). The values
# public clients saw (hushiliang2009, cookjohn); SCI and EI values are invented (none seen: found by name).
CATEGORY_FIELD = "LYBSM"
_CATEGORY_OF_TAG = {
    "北大核心": ("P01", "北大核心"), "CSSCI": ("P0209", "CSSCI"), "CSCD": ("P0210", "CSCD"), "WJCI": ("P12", "WJCI"),
    "AMI核心": ("P13", "AMI"), "AMI顶级": ("P13", "AMI"), "AMI扩展": ("P13", "AMI"), "SCI": ("SIMSCI", "SCI"), "EI": ("SIMEI", "EI"),
}
CATEGORIES = {j.key: list(dict.fromkeys(_CATEGORY_OF_TAG[t] for t in j.tiers if t in _CATEGORY_OF_TAG)) for j in JOURNALS}
HIDDEN_AFTER = 5  # hidden_more: entries after these sit behind 更多 (display:none)
FOLDED_AFTER = 2  # folded: in a request for several groups, those after the first two come without entries


def _code(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()[:10].upper()


def values(paper: Paper, field: str) -> list[tuple[str, str]]:
    """(value, text) entries ``paper`` counts under in the dd ``field``."""
    if field == "YE":
        return [(str(paper.year), str(paper.year))]
    if field == "CCL":
        subject = SUBJECTS.get(paper.clc[0][:1]) if paper.clc else None
        return [subject] if subject else []
    if field == "ZYZT":
        return [(k, k) for k in paper.keywords[:2]]
    if field == "CYZT":
        return [(k, k) for k in paper.keywords[2:]]
    if field in ("WXLY", "QK"):
        return [(paper.source_key or _code(paper.source), paper.source)] if paper.source else []
    if field == "AUC":
        return [(_code(a), a) for a in paper.authors]
    if field == "AFC":
        return [(_code(i), i) for i in paper.institutions]
    if field == "FUC":
        return [(_code(f), f) for f in paper.funds]
    if field in ("WXLX2", "WXLX"):
        return [(paper.resource, paper.doc_type)]
    if field == CATEGORY_FIELD:
        return CATEGORIES.get(paper.source_key, []) if paper.resource == "JOURNAL" else []
    return []


def matches(paper: Paper, groups: list[list[tuple[str, str]]]) -> bool:
    """The SCDBGroup refinement: every child group has one (field, value) the paper counts under."""
    for items in groups:
        if not any(value in {v for v, _ in values(paper, field)} for field, value in items):
            return False
    return True


def _get(d: dict[str, Any], key: str, default: Any = None) -> Any:
    for k, v in d.items():
        if k.lower() == key.lower():
            return v
    return default


def scdb_groups(raw: dict[str, Any]) -> list[list[tuple[str, str]]]:
    """The refinement of a QueryJson: each SCDBGroup child group as its (Field, Value) items."""
    node = _get(raw, "QNode") or {}
    out: list[list[tuple[str, str]]] = []
    for group in _get(node, "QGroup") or []:
        if not isinstance(group, dict) or _get(group, "Key") != "SCDBGroup":
            continue
        for child in _get(group, "ChildItems") or []:
            items = [(str(_get(i, "Field", "")).upper(), str(_get(i, "Value", ""))) for i in _get(child, "Items") or []]
            if items:
                out.append(items)
    return out


def _count_text(count: int, style: str) -> str:
    if style == "wan" and count >= 10000:
        return f"({count / 10000:.2f}".rstrip("0").rstrip(".") + "万)"
    if style == "comma":
        return f"({count:,})"
    return f"({count})"


def _entries(hits: Iterable[Paper], field: str) -> list[tuple[str, str, int]]:
    counts: Counter[tuple[str, str]] = Counter()
    for paper in hits:
        for entry in dict.fromkeys(values(paper, field)):
            counts[entry] += 1
    if field == "YE":
        return sorted(((v, t, n) for (v, t), n in counts.items()), key=lambda e: e[0], reverse=True)
    return sorted(((v, t, n) for (v, t), n in counts.items()), key=lambda e: (-e[2], e[1]))


def panel(hits: list[Paper], group_ids: str, style: str, count_style: str) -> str:
    """The ``group/result`` answer for the listing ``hits`` and the asked ``groupIds``."""
    asked = [g for g in (group_ids or "").split(",") if g.strip()] or list(DEFAULT_GROUPS)
    if style == "unknown":
        names = "".join(f"<li>{escape(TITLES.get(g, g))}</li>" for g in asked)
        return f'<div class="group-panel-v2"><ul class="facet-list">{names}</ul></div>'
    parts = ['<div id="divGroup">']
    for position, ident in enumerate(asked):
        if style == "no_funds" and ident == "FUC":
            continue
        shown = ALIASES.get(ident, ident) if style == "aliases" else ident
        folded = style == "folded" and len(asked) > 1 and position >= FOLDED_AFTER
        fold = ' class="is-up-fold"' if folded else ""
        parts.append(f'<dl groupid="{escape(shown)}"{fold}>')
        parts.append(f'<dt class="tit" groupitem="{escape(shown)}"><b>{escape(TITLES.get(shown, shown))}</b></dt>')
        for field in shown.split("|||"):
            tit = FIELD_TITLES.get(field, TITLES.get(shown, field))
            parts.append(f'<dd field="{escape(field)}" tit="{escape(tit)}"><div class="resultlist"><ul>')
            if not folded:
                for index, (value, text, count) in enumerate(_entries(hits, field)):
                    hide = ' style="display:none"' if style == "hidden_more" and index >= HIDDEN_AFTER else ""
                    parts.append(
                        f'<li{hide}><input type="checkbox" value="{escape(value)}" text="{escape(text)}">'
                        f" <a>{escape(text)}</a> <span>{_count_text(count, count_style)}</span></li>"
                    )
            parts.append("</ul></div></dd>")
        parts.append("</dl>")
    parts.append("</div>")
    return "".join(parts)


def expected(hits: list[Paper], field: str) -> list[tuple[str, str, int]]:
    """The oracle: (value, text, count) of ``field`` for the listing ``hits``, in the panel's order."""
    return _entries(hits, field)

"""Interpretation of the brief/grid QueryJson against the corpus.

Semantics chosen for the simulator (documented in README.md):
- A group folds its Items, then its ChildItems, left to right; each element's Logic says how
  it joins what came before: 0/AND, 1/OR, 2/NOT (= AND NOT).  The first element's Logic is
  ignored unless it is NOT.
- Operators: TOPRANK / FUZZY / '%' / '%=' match every whitespace-separated token as a
  case-insensitive substring (a quoted value is one token); DEFAULT / '=' is exact: equal to one
  element for list-like fields (authors, keywords, source, DOI …), a contiguous phrase for text
  fields (title, abstract, full text …); PREFIX / SUFFIX match the start of an element.
- A professional-search item (Field EXPERT, SearchType 4) is read by expert.py: its literals use the
  rules above as one token each.
- SCDBGroup (the left panel's picks, facets.py): each child group ORs its items, the groups are ANDed.
- ControlGroup: PT items with Operator 7 give an inclusive date range (Value / Value2,
  either may be empty); quality flags CSI/HX/SI/EI/CSD/AMI = Y keep papers whose journal has
  the tier; WLSF = Y keeps online-first papers.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from . import facets
from .corpus import Corpus, Paper
from .expert import Compiled, ExpertRefused, compile_expert

# Scenario ly_similar, set by the server around a listing's search (the matching below has no scenario).
similar_sources: ContextVar[bool] = ContextVar("similar_sources", default=False)
LIST_FIELDS = {"AUC", "AU", "FI", "RP", "KY", "LY", "DOI", "CLC", "AF", "FAF", "FU", "TU", "XF"}
TEXT_FIELDS = {"SU", "TKA", "TI", "AB", "FT", "RF", "ST", "CO"}
KNOWN_FIELDS = LIST_FIELDS | TEXT_FIELDS
TIER_FLAGS = {"CSI": "CSSCI", "HX": "北大核心", "SI": "SCI", "EI": "EI", "CSD": "CSCD", "AMI": "AMI"}
CLASSIDS = {
    "WD0FTY92": None, "CROSSDB": None,
    "YSTT4HG0": {"JOURNAL"}, "JOURNAL": {"JOURNAL"},
    "LSTPFY1C": {"DISSERTATION"}, "DISSERTATION": {"DISSERTATION"},
    "RMJLXHZ3": {"博士"}, "JQIRZIYA": {"硕士"},
    "JUP3MUPD": {"CONFERENCE"}, "CONFERENCE": {"CONFERENCE"},
    "MPMFIG1A": {"NEWSPAPER"}, "NEWSPAPER": {"NEWSPAPER"},
    "EMRPGLPA": {"BOOK"}, "BOOK": {"BOOK"},
}


class QueryRejected(ValueError):
    """The site would answer with p.no-content and this reason in its value attribute."""


@dataclass
class ParsedQuery:
    subject: dict[str, Any]
    date_from: str
    date_to: str
    flags: set[str]
    scope: set[str] | None
    positive_terms: list[str]
    raw: dict[str, Any]
    expert_codes: frozenset[str] = frozenset()  # field codes of a professional-search expression
    picks: list[list[tuple[str, str]]] = field(default_factory=list)  # SCDBGroup: the left panel's picks

    def fingerprint(self) -> str:
        """Stable key of what was searched (not the page or sort): binds the turn-page cursor."""
        body = json.dumps([self.subject, self.date_from, self.date_to, sorted(self.flags),
                           sorted(self.scope or []), *([self.picks] if self.picks else [])], sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(body.encode()).hexdigest()[:24]


def _logic(v: Any) -> int:
    if isinstance(v, str):
        v = v.strip().upper()
        return {"AND": 0, "OR": 1, "NOT": 2, "0": 0, "1": 1, "2": 2}.get(v, 0)
    return int(v or 0)


def _get(d: dict[str, Any], key: str, default: Any = None) -> Any:
    """CNKI sends PascalCase keys; #briefRequest shows lowercase ones.  Accept both."""
    if key in d:
        return d[key]
    low = key.lower()
    for k, v in d.items():
        if k.lower() == low:
            return v
    return default


def _unquote(value: str) -> tuple[str, bool]:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1], True
    return v, False


def parse_query_json(text: str) -> ParsedQuery:
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise QueryRejected("查询对象结构错误") from exc
    if not isinstance(raw, dict):
        raise QueryRejected("查询对象结构错误")
    qnode = _get(raw, "QNode")
    groups = _get(qnode, "QGroup") if isinstance(qnode, dict) else None
    if not isinstance(groups, list):
        raise QueryRejected("查询对象结构错误")
    subject: dict[str, Any] | None = None
    date_from = date_to = ""
    flags: set[str] = set()
    for g in groups:
        if not isinstance(g, dict):
            raise QueryRejected("查询对象结构错误")
        key = _get(g, "Key", "")
        if key == "Subject":
            subject = g
        elif key == "ControlGroup":
            for item in _walk_items(g):
                fld = str(_get(item, "Field", "")).upper()
                if fld == "PT" and str(_get(item, "Operator", "")) in ("7", "BETWEEN"):
                    date_from = str(_get(item, "Value", "") or "")
                    date_to = str(_get(item, "Value2", "") or "")
                elif fld in TIER_FLAGS or fld == "WLSF":
                    if str(_get(item, "Value", "")).upper() == "Y":
                        flags.add(fld)
    if subject is None:
        raise QueryRejected("查询对象结构错误, 没有指定检索分类！")
    conds = list(_walk_items(subject))
    if not conds:
        raise QueryRejected("查询对象结构错误, 没有指定检索条件！")
    expert: Compiled | None = None
    for item in conds:
        fld = str(_get(item, "Field", "")).upper()
        if fld == "EXPERT":
            expert = _expert(raw, item, len(conds))
        elif fld not in KNOWN_FIELDS:
            raise QueryRejected(f"检索字段错误：{fld}")
    classid = str(_get(raw, "Classid", "") or _get(raw, "Resource", "") or "WD0FTY92")
    scope = CLASSIDS.get(classid.upper(), None)
    positive = [
        _unquote(str(_get(i, "Value", "")))[0]
        for i in conds
        if _logic(_get(i, "Logic", 0)) != 2 and str(_get(i, "Field", "")).upper() in {"SU", "TI", "TKA", "KY"}
    ]
    if expert is not None:
        positive = list(expert.terms)
    codes = expert.codes if expert is not None else frozenset()
    return ParsedQuery(subject, date_from, date_to, flags, scope, positive, raw, codes, facets.scdb_groups(raw))


def _expert(raw: dict[str, Any], item: dict[str, Any], items: int) -> Compiled:
    """The professional-search item: alone in the Subject group, with the 专业检索 form's SearchType."""
    if items != 1 or str(_get(raw, "SearchType", "")) != "4":
        raise QueryRejected("查询对象结构错误")
    try:
        return compile_expert(str(_get(item, "Value", "")), match_literal)
    except ExpertRefused as exc:
        raise QueryRejected(str(exc)) from None


def _walk_items(group: dict[str, Any]):
    for item in _get(group, "Items", []) or []:
        if isinstance(item, dict):
            yield item
    for child in _get(group, "ChildItems", []) or []:
        if isinstance(child, dict):
            yield from _walk_items(child)


def match_condition(paper: Paper, item: dict[str, Any]) -> bool:
    fld = str(_get(item, "Field", "")).upper()
    if fld == "EXPERT":
        return compile_expert(str(_get(item, "Value", "")), match_literal).test(paper)
    op = str(_get(item, "Operator", "FUZZY")).upper()
    value, quoted = _unquote(str(_get(item, "Value", "")))
    return match_value(paper, fld, op, value, quoted)


def match_literal(paper: Paper, fld: str, op: str, literal: str) -> bool:
    """One literal of a professional-search expression: one token, under the advanced form's rules."""
    return match_value(paper, fld, op, literal, True)


def similar_name(name: str, wanted: str) -> bool:
    """Scenario ``ly_similar``: a journal name CNKI's LY= also reaches (as long, the same last two characters:
    软件工程学报 for 智能系统学报)."""
    return len(name) == len(wanted) and len(wanted) >= 4 and name[-2:] == wanted[-2:]


def match_value(paper: Paper, fld: str, op: str, value: str, quoted: bool) -> bool:
    if not value:
        return False
    texts = paper.lowered(fld)
    v = value.lower()
    if op in ("DEFAULT", "="):
        if fld == "LY" and similar_sources.get():
            return any(t == v or similar_name(t, v) for t in texts)
        if fld in LIST_FIELDS:
            return any(t == v for t in texts)
        return any(v in t for t in texts)
    if op in ("PREFIX", "SUFFIX"):
        return any(t.startswith(v) for t in texts)
    tokens = [v] if quoted else [t for t in re.split(r"\s+", v) if t]
    return any(all(tok in t for tok in tokens) for t in texts) if fld in LIST_FIELDS else \
        all(any(tok in t for t in texts) for tok in tokens)


def eval_group(paper: Paper, group: dict[str, Any]) -> bool:
    parts: list[tuple[int, bool]] = []
    for item in _get(group, "Items", []) or []:
        if isinstance(item, dict):
            parts.append((_logic(_get(item, "Logic", 0)), match_condition(paper, item)))
    for child in _get(group, "ChildItems", []) or []:
        if isinstance(child, dict) and (_get(child, "Items") or _get(child, "ChildItems")):
            parts.append((_logic(_get(child, "Logic", 0)), eval_group(paper, child)))
    if not parts:
        return True
    logic0, result = parts[0]
    result = (not result) if logic0 == 2 else result
    for logic, ok in parts[1:]:
        if logic == 1:
            result = result or ok
        elif logic == 2:
            result = result and not ok
        else:
            result = result and ok
    return result


def _in_scope(paper: Paper, q: ParsedQuery, corpus: Corpus) -> bool:
    if q.scope is not None and paper.resource not in q.scope and paper.doc_type not in q.scope:
        return False
    day = paper.date[:10]
    if q.date_from and day < q.date_from[:10]:
        return False
    if q.date_to and day > q.date_to[:10]:
        return False
    for flag in q.flags:
        if flag == "WLSF":
            if not paper.online_first:
                return False
            continue
        j = corpus.journal(paper.source_key) if paper.is_journal else None
        tier = TIER_FLAGS[flag]
        if j is None or not any(t.startswith(tier) for t in j.tiers):
            return False
    return True


def relevance(paper: Paper, terms: list[str]) -> float:
    score = 0.0
    for t in terms:
        t = t.lower()
        if not t:
            continue
        score += 5 * paper.title.lower().count(t) + 3 * sum(k.lower() == t for k in paper.keywords)
        score += paper.abstract.lower().count(t)
    return score


SORT_KEYS = {"PT": "date", "CF": "cited", "DFR": "downloads", "DF": "downloads"}


def search(corpus: Corpus, q: ParsedQuery, sort_field: str, sort_type: str) -> list[Paper]:
    hits = [
        p for p in corpus.papers
        if _in_scope(p, q, corpus) and eval_group(p, q.subject) and (not q.picks or facets.matches(p, q.picks))
    ]
    key = SORT_KEYS.get(sort_field.upper())
    asc = sort_type.lower() == "asc"
    if key == "date":
        hits.sort(key=lambda p: (p.date, -p.idx), reverse=not asc)
    elif key:
        hits.sort(key=lambda p: (getattr(p, key), -p.idx), reverse=not asc)
    else:  # FFD / ZH / empty: relevance, then newest first
        hits.sort(key=lambda p: (-relevance(p, q.positive_terms), _neg_date(p.date), p.idx))
    return hits


def _neg_date(date: str) -> tuple[int, ...]:
    return tuple(-int(x) for x in re.findall(r"\d+", date))

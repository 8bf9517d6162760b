"""The grid's request language: expression trees compiled into CNKI's "OR of AND-groups" conditions, the
captured request template's ``QueryJson`` and form fields rewritten for one grid page, and the sorts.

Pure: no I/O, no browser. Errors are ``CnkiError`` with the catalogue's codes. Planning a research question
into expressions is ``research.query``'s job; the site sends what this module writes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Channel
from cnki_mcp.core.text import is_blank
from cnki_mcp.site.facet_query import FacetPick

# --- limits ---------------------------------------------------------------------------------------

MAX_VALUE_CHARS = 120
MAX_NODES = 96
MAX_DEPTH = 8
MAX_BRANCHES = 32
MIN_OPERANDS = 2
MAX_OPERANDS = 12
TITLES_PER_LOCATE = 10


# --- expression trees -----------------------------------------------------------------------------


def leaf(field: str, value: str, match: str = "phrase") -> dict[str, Any]:
    return {"field": field, "value": value, "match": match}


def combine(op: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    # An and/or of one child is just that child.
    return items[0] if len(items) == 1 else {"op": op, "items": items}


def title_expression(titles: Sequence[str]) -> dict[str, Any]:
    """Exact-title leaves ORed together (at most 10 titles go into one grid request)."""
    if not 1 <= len(titles) <= TITLES_PER_LOCATE:
        raise ValueError(f"title_expression takes 1–{TITLES_PER_LOCATE} titles, got {len(titles)}")
    return combine("or", [leaf("title", title, "exact") for title in titles])


# --- structured fields ----------------------------------------------------------------------------

# API field -> (CNKI field code, label on CNKI's advanced-search page).
FIELDS: dict[str, tuple[str, str]] = {
    "subject": ("SU", "主题"),
    "title": ("TI", "篇名"),
    "keywords": ("KY", "关键词"),
    "abstract": ("AB", "摘要"),
    "authors": ("AU", "作者"),
    "first_author": ("FI", "第一作者"),
    "corresponding_author": ("RP", "通讯作者"),
    "institutions": ("AF", "作者单位"),
    "source": ("LY", "文献来源"),
    "doi": ("DOI", "DOI"),
    "funds": ("FU", "基金"),
    "fulltext": ("FT", "全文"),
    "references": ("RF", "参考文献"),
    "classification": ("CLC", "分类号"),
    "subtitle": ("ST", "小标题"),
    "title_keywords_abstract": ("TKA", "篇关摘"),
}
MATCHES = ("", "phrase", "exact")
SENTENCE_FIELD = "sentence"
# scope → (senquery Operator, its Title). Sources give the operators NEAR and SENTENCE and the titles 同一句 and
# 同段 without saying which goes with which; SENTENCE for one sentence is this product's reading.
SENTENCE_SCOPES: dict[str, tuple[str, str]] = {"sentence": ("SENTENCE", "同一句"), "paragraph": ("NEAR", "同段")}
SEARCH_TYPE_SENTENCE = 5  # QueryJson SearchType of the 句子检索 form
LOGIC_AND, LOGIC_OR, LOGIC_NOT = 0, 1, 2

# Characters CNKI reads as operators inside a value, plus whitespace and quotes.
_NEEDS_QUOTES = frozenset("+*()/%= -\t\"'")


class Expression(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """One node of a structured_search expression: a leaf (field/value/match) or an operator (op/items)."""

    field: str = ""
    value: str = ""
    match: str = ""
    op: str = ""
    items: list[Expression] = []
    value2: str = ""  # a sentence leaf's second term
    scope: str = ""  # a sentence leaf's reach: sentence (同一句, the default) or paragraph (同段)


class Condition(msgspec.Struct, frozen=True):
    """One literal of a compiled branch."""

    field: str
    value: str
    match: str = "phrase"
    negated: bool = False

    @property
    def code(self) -> str:
        return FIELDS[self.field][0]

    @property
    def operator(self) -> str:
        if self.field == "subject":
            return "TOPRANK"
        return "DEFAULT" if self.match == "exact" else "FUZZY"

    def item(self) -> dict[str, Any]:
        """The QueryJson item CNKI expects for this literal."""
        return {
            "Key": "mcp",
            "Title": self.field,
            "Logic": LOGIC_NOT if self.negated else LOGIC_AND,
            "Field": self.code,
            "Operator": self.operator,
            "Value": quote_value(self.value),
            "Value2": "",
            "options": {},
        }


def quote_value(value: str) -> str:
    """Quote a value that contains an operator character, whitespace or a quote."""
    if '"' in value and "'" in value:
        raise CnkiError(
            "QUERY_UNSUPPORTED", f"检索词不能同时包含双引号和单引号：{value}", details={"value": value}
        )
    if _NEEDS_QUOTES.isdisjoint(value):
        return value
    quote = "'" if '"' in value else '"'
    return f"{quote}{value}{quote}"


def decode_expression(expression: Any) -> Expression:
    """A JSON object (or an Expression) as an Expression tree; an unknown key is refused, like unknown
    arguments elsewhere (a misspelt ``fields`` must not silently widen a search)."""
    if isinstance(expression, Expression):
        return expression
    try:
        return msgspec.convert(expression, Expression)
    except msgspec.ValidationError as exc:
        hint = "（条件只能有 field、value、match，或 op、items）" if "unknown field" in str(exc) else ""
        raise CnkiError("INVALID_EXPRESSION", f"expression 的结构无效{hint}：{exc}") from None
    except RecursionError:
        # Nested past what the converter can follow: far beyond MAX_DEPTH, so the same code as depth 9.
        raise CnkiError("QUERY_TOO_COMPLEX", f"检索条件过于复杂：最多 {MAX_DEPTH} 层嵌套。") from None


class _Walk:
    def __init__(self) -> None:
        self.nodes = 0

    def branches(self, node: Expression, depth: int, negated: bool) -> list[list[Condition]]:
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            raise CnkiError(
                "QUERY_TOO_COMPLEX", f"检索条件过于复杂：最多 {MAX_NODES} 个节点、{MAX_DEPTH} 层嵌套。"
            )
        if not node.op:
            return [[self._literal(node, negated)]]
        if node.field or node.value:
            raise CnkiError("INVALID_EXPRESSION", f"{node.op} 条件不能同时带 field 或 value。")
        if node.op == "not":
            if len(node.items) != 1:
                raise CnkiError("INVALID_NOT", f"not 条件必须恰好包含 1 个子条件，收到 {len(node.items)} 个。")
            return self.branches(node.items[0], depth + 1, not negated)
        if node.op not in ("and", "or"):
            raise CnkiError("INVALID_OPERATOR", f"未知的 op：{node.op}；只能是 and、or、not。")
        if not MIN_OPERANDS <= len(node.items) <= MAX_OPERANDS:
            raise CnkiError(
                "INVALID_OPERATOR",
                f"{node.op} 需要 {MIN_OPERANDS}–{MAX_OPERANDS} 个子条件，收到 {len(node.items)} 个。",
            )
        # De Morgan: a negated AND is an OR of negated children, and vice versa.
        as_or = (node.op == "or") != negated
        out: list[list[Condition]] = [] if as_or else [[]]
        for child in node.items:
            child_branches = self.branches(child, depth + 1, negated)
            if as_or:
                out += child_branches
            else:
                if len(out) * len(child_branches) > MAX_BRANCHES:
                    raise _too_many_branches()
                out = [mine + theirs for mine in out for theirs in child_branches]
            if len(out) > MAX_BRANCHES:
                raise _too_many_branches()
        return out

    @staticmethod
    def _literal(node: Expression, negated: bool) -> Condition:
        if node.field == SENTENCE_FIELD:
            raise CnkiError(
                "INVALID_EXPRESSION", "句子检索（field=sentence）必须单独作为整个 expression，不能与其他条件组合或放在 not 中。",
                details={"field": SENTENCE_FIELD},
            )
        if node.value2 or node.scope:
            raise CnkiError(
                "INVALID_CONDITION", f"value2 和 scope 只用于句子检索（field=sentence），{node.field} 条件不能带。",
                details={"field": node.field},
            )
        value = "" if is_blank(node.value) else node.value.strip()
        if node.field not in FIELDS:
            raise CnkiError(
                "INVALID_CONDITION", f"未知的检索字段：{node.field or '（空）'}。", details={"field": node.field}
            )
        if not value or len(value) > MAX_VALUE_CHARS or node.items:
            raise CnkiError(
                "INVALID_CONDITION",
                f"{node.field} 条件的检索词须为 1–{MAX_VALUE_CHARS} 字，且不能带子条件。",
                details={"field": node.field},
            )
        if node.match not in MATCHES:
            raise CnkiError("INVALID_MATCH", f"match 只能是 phrase 或 exact，收到 {node.match}。")
        return Condition(node.field, value, node.match or "phrase", negated)


def _too_many_branches() -> CnkiError:
    return CnkiError("QUERY_TOO_COMPLEX", f"检索条件展开后超过 {MAX_BRANCHES} 组，请减少 or 的组合。")


class Sentence(msgspec.Struct, frozen=True):
    """A 句子检索: two terms in one sentence (``scope="sentence"``) or one paragraph (``"paragraph"``)."""

    value: str
    value2: str
    scope: str = "sentence"

    def item(self) -> dict[str, Any]:
        """The senquery item (LongMarching, azazo1): full text (FT), the scope's operator and its label."""
        operator, title = SENTENCE_SCOPES[self.scope]
        return {"Key": "sentence0", "Title": title, "Logic": LOGIC_AND, "Field": "FT", "Operator": operator,
                "Value": self.value, "Value2": self.value2}


def sentence_of(expression: Any) -> Sentence | None:
    """The sentence search an expression is (a lone ``{field: "sentence", value, value2, scope}`` leaf),
    checked; None for any other expression (compile_expression refuses a sentence leaf inside a tree)."""
    return _sentence(decode_expression(expression))


def _sentence(node: Expression) -> Sentence | None:
    if node.op or node.field != SENTENCE_FIELD:
        return None
    terms = ["" if is_blank(v) else v.strip() for v in (node.value, node.value2)]
    if node.items or node.match or not all(1 <= len(t) <= MAX_VALUE_CHARS for t in terms):
        raise CnkiError(
            "INVALID_CONDITION", f"句子检索须给出 value 和 value2 两个检索词，各 1–{MAX_VALUE_CHARS} 字（不带 match 或子条件）。",
            details={"field": SENTENCE_FIELD},
        )
    scope = node.scope or "sentence"
    if scope not in SENTENCE_SCOPES:
        raise CnkiError("INVALID_CONDITION", f"句子检索的 scope 只能是 sentence（同一句）或 paragraph（同段），收到 {scope}。",
                        details={"field": SENTENCE_FIELD})
    return Sentence(terms[0], terms[1], scope)


class CompiledQuery(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one listing asks CNKI for, checked and compiled once: the OR of AND-branches of a condition tree,
    a professional-search expression (canonical) or a 句子检索."""

    branches: list[list[Condition]] = []
    expert: str = ""
    sentence: Sentence | None = None


def compile_query(expression: Any) -> CompiledQuery:
    """A structured expression (a JSON object or an Expression), decoded once and compiled: a lone sentence
    leaf is a 句子检索, any other tree its branches. Every error a grid request could meet is raised here,
    so structured_search can validate before any browser work."""
    node = decode_expression(expression)
    sentence = _sentence(node)
    return CompiledQuery(sentence=sentence) if sentence is not None else CompiledQuery(branches=_compile_tree(node))


def compile_channel(channel: Channel) -> CompiledQuery:
    """A search channel's listing: its professional-search expression, else its expression compiled."""
    return CompiledQuery(expert=channel.expert) if channel.expert else compile_query(channel.expression)


def compile_expression(expression: Any) -> list[list[Condition]]:
    """The expression as an OR of AND-branches (DNF), fully checked against CNKI's limits (``compile_query``);
    a sentence search (``sentence_of``) has no branches."""
    return compile_query(expression).branches


def _compile_tree(node: Expression) -> list[list[Condition]]:
    """Branches keep their literals in walk order; nothing is simplified."""
    branches = _Walk().branches(node, 0, False)
    for branch in branches:
        if all(condition.negated for condition in branch):
            raise CnkiError("UNBOUNDED_QUERY", "展开后的每一组条件都必须至少有一个肯定条件（不能只有 not）。")
        for condition in branch:
            if condition.field == "subject" and condition.match == "exact":
                raise CnkiError("QUERY_UNSUPPORTED", "主题不支持严格精确匹配；可改用篇名或关键词。")
            quote_value(condition.value)
    return branches


def anchor_term(expression: Any) -> str:
    """The first leaf value reached depth-first without entering ``not``: the term typed to capture a template."""
    node = decode_expression(expression)
    if not node.op:
        return node.value.strip()
    if node.op == "not":
        return ""
    for child in node.items:
        term = anchor_term(child)
        if term:
            return term
    return ""


def subject_group(branches: Sequence[Sequence[Condition]]) -> dict[str, Any]:
    """CNKI's ``Subject`` query group: one child group per branch, branches ORed, positives first."""
    children = []
    for i, branch in enumerate(branches):
        ordered = [c for c in branch if not c.negated] + [c for c in branch if c.negated]
        children.append(
            {
                "Key": "mcp",
                "Title": "",
                "Logic": LOGIC_AND if i == 0 else LOGIC_OR,
                "Items": [condition.item() for condition in ordered],
                "ChildItems": [],
            }
        )
    return {"Key": "Subject", "Title": "", "Logic": 0, "Items": [], "ChildItems": children}


# --- the grid request -----------------------------------------------------------------------------

SENQUERY_PATH = "/brief/senquery"  # where a 句子检索 is asked, beside the grid's /brief/grid


def listing_url(grid_url: str, query: GridQuery) -> str:
    """The URL a listing is POSTed to: the captured grid URL, or its senquery sibling for a sentence search."""
    return grid_url.replace("/brief/grid", SENQUERY_PATH, 1) if query.sentence is not None else grid_url


SORT_CODES: dict[str, str] = {"": "FFD", "relevance": "FFD", "date_desc": "PT", "cited_desc": "CF", "downloaded_desc": "DFR"}
SORT_LABELS: dict[str, str] = {"FFD": "相关度", "PT": "发表时间", "CF": "被引次数", "DFR": "下载次数", "ZH": "综合"}
PAGE_SIZE = 50
SEARCH_FROM_NEW = 1
SEARCH_FROM_PAGING = 4
SEARCH_FROM_SORT = 5
SEARCH_TYPE_EXPERT = 4  # QueryJson SearchType of the 专业检索 form (1 is the advanced form's)
DATE_KEY = ".tit-date-box"
DATE_TITLE = "发表时间"
DATE_OPERATOR = 7
QUERY_JSON_FIELDS = ("QueryJson", "queryJson")


def _unsupported(message: str) -> CnkiError:
    return CnkiError("QUERY_TEMPLATE_UNSUPPORTED", f"知网检索请求的格式与预期不符：{message}")


def _query_groups(query_json: Any) -> list[Any]:
    node = query_json.get("QNode") if isinstance(query_json, dict) else None
    groups = node.get("QGroup") if isinstance(node, dict) else None
    if not isinstance(groups, list):
        raise _unsupported("缺少 QNode.QGroup")
    return groups


def query_json_field(form: Mapping[str, str]) -> str:
    """The form field carrying QueryJson (some pages send it lower-cased)."""
    for name in QUERY_JSON_FIELDS:
        if name in form:
            return name
    raise _unsupported("缺少 QueryJson 字段")


def template_query_json(form: Mapping[str, str]) -> dict[str, Any]:
    """The captured template's QueryJson, parsed and checked for the shape the rewrite needs."""
    try:
        query_json = json.loads(form[query_json_field(form)])
    except (TypeError, ValueError):
        raise _unsupported("QueryJson 不是 JSON") from None
    _query_groups(query_json)
    return query_json


def _date_group(year_from: int, year_to: int) -> dict[str, Any]:
    start = f"{year_from:04d}-01-01" if year_from > 0 else ""
    end = f"{year_to:04d}-12-31" if year_to > 0 else ""
    item = {
        "Key": DATE_KEY,
        "Title": DATE_TITLE,
        "Logic": 0,
        "Field": "PT",
        "Operator": DATE_OPERATOR,
        "Value": start,
        "Value2": end,
        "options": {},
    }
    return {"Key": DATE_KEY, "Title": DATE_TITLE, "Logic": 0, "Items": [item], "ChildItems": []}


def expert_group(expression: str) -> dict[str, Any]:
    """The ``Subject`` group of the page's 专业检索 form: one ``EXPERT`` item holding the expression."""
    item = {"Key": "Expert", "Title": "", "Logic": LOGIC_AND, "Field": "EXPERT", "Operator": 0, "Value": expression, "Value2": ""}
    return {"Key": "Subject", "Title": "", "Logic": 0, "Items": [item], "ChildItems": []}


def sentence_group(sentence: Sentence) -> dict[str, Any]:
    """The ``Subject`` group of the 句子检索 form: its one ``sentence0`` item (a second item is refused)."""
    return {"Key": "Subject", "Title": "", "Logic": 0, "Items": [sentence.item()], "ChildItems": []}


def expert_aside(expression: str) -> str:
    """The form's ``aside`` for an expression as that form writes it: (…) with quotes as HTML entities."""
    return "(" + expression.replace("'", "&#39;").replace('"', "&quot;") + ")"


def rewrite_query_json(
    template: Mapping[str, Any],
    branches: Sequence[Sequence[Condition]],
    *,
    year_from: int = 0,
    year_to: int = 0,
    page: int = 1,
    sort_request: bool = False,
    expert: str = "",
    sentence: Sentence | None = None,
) -> dict[str, Any]:
    """A copy of the template's QueryJson asking for ``branches`` (or the professional-search expression
    ``expert``, as the 专业检索 form asks, or the 句子检索 ``sentence``) within the year range, for ``page``
    (``sort_request``: page 1 asked the way the page's sort links ask)."""
    query_json = copy.deepcopy(dict(template))
    groups = _query_groups(query_json)
    subject_found = False
    control: dict[str, Any] | None = None
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            raise _unsupported("QGroup 中有非对象的条件组")
        if group.get("Key") == "Subject":
            groups[i] = expert_group(expert) if expert else sentence_group(sentence) if sentence else subject_group(branches)
            subject_found = True
        elif group.get("Key") == "ControlGroup":
            control = group
    if not subject_found:
        raise _unsupported("缺少知网查询条件组")
    if year_from > 0 or year_to > 0:
        if control is None:
            # Templates captured without filters may lack it; the year range must still reach the site.
            control = {"Key": "ControlGroup", "Title": "", "Logic": 0, "Items": [], "ChildItems": []}
            groups.append(control)
        children = control.get("ChildItems")
        if children is None:
            children = control["ChildItems"] = []
        if not isinstance(children, list):
            raise _unsupported("ControlGroup.ChildItems 不是数组")
        children.append(_date_group(year_from, year_to))
    if expert:
        query_json["SearchType"] = SEARCH_TYPE_EXPERT
    if sentence is not None:
        query_json["SearchType"] = SEARCH_TYPE_SENTENCE
    if page > 1:
        query_json["SearchFrom"] = SEARCH_FROM_PAGING
    else:
        query_json["SearchFrom"] = SEARCH_FROM_SORT if sort_request else SEARCH_FROM_NEW
    return query_json


def with_site_echo(query_json: Mapping[str, Any], products: str, view: str) -> dict[str, Any]:
    """A page ≥ 2 QueryJson carrying what page 1's answer said of the query (``#briefRequest``):
    its ``Products`` and ``View``, as the result page's own script sends them when paging."""
    echoed = dict(query_json)
    if products:
        echoed["Products"] = products
    if view:
        echoed["View"] = view
    return echoed


class GridQuery(msgspec.Struct, frozen=True):
    """One listing: compiled branches (OR of AND groups) or an expression, publication years and CNKI sort."""

    branches: list[list[Condition]]
    year_from: int = 0
    year_to: int = 0
    sort: str = "relevance"
    expert: str = ""  # a professional-search expression instead of branches
    facets: tuple[FacetPick, ...] = ()  # picks of the left panel (search_facets codes) narrowing the listing
    sentence: Sentence | None = None  # a 句子检索 instead of branches (asked of brief/senquery)

    @classmethod
    def of(
        cls, compiled: CompiledQuery, year_from: int = 0, year_to: int = 0, sort: str = "relevance",
        facets: tuple[FacetPick, ...] = (),
    ) -> GridQuery:
        """The listing of a compiled query (never compiled again here) within the years, in ``sort``."""
        return cls(compiled.branches, year_from, year_to, sort, expert=compiled.expert, facets=facets,
                   sentence=compiled.sentence)


def in_years(year: int, year_from: int, year_to: int) -> bool:
    """Whether a row of a listing asked within the years is kept: 0 is unbounded, and with a bound a row
    without a year is not (CNKI applies the range too; this catches what it lets through)."""
    if year_from <= 0 and year_to <= 0:
        return True
    return year > 0 and (year_from <= 0 or year >= year_from) and (year_to <= 0 or year <= year_to)


def sort_code(sort: str) -> str:
    try:
        return SORT_CODES[sort]
    except KeyError:
        raise CnkiError("INVALID_SORT", f"sort 只能是 relevance、date_desc、cited_desc 或 downloaded_desc，收到 {sort}。") from None


def grid_form(
    template_form: Mapping[str, str],
    query_json: Mapping[str, Any],
    *,
    page: int = 1,
    sort: str = "",
    cursor: str = "",
    page_size: int = PAGE_SIZE,
    new_search: bool = True,
    sort_request: bool = False,
    expert: str = "",
    sentence: bool = False,
) -> dict[str, str]:
    """The grid POST's form: the template's fields with the query, page, sort and paging cursor forced.

    Pages after the first need ``cursor`` (``#hidTurnPage`` of the previous page of the same query).
    Page 1 is a new search (``boolSearch=true``) unless ``new_search`` is False (asked again after a
    solved challenge); ``sort_request`` asks the way the page's sort links do (``boolSortSearch=true``);
    ``expert`` is the expression of a professional search, echoed in ``aside`` as its form does;
    ``sentence`` marks a 句子检索 (``sentenceSearch=true``).
    """
    if page > 1 and not cursor:
        raise ValueError("pages after the first need the paging cursor of page 1")
    form = {name: str(value) for name, value in template_form.items()}
    form[query_json_field(template_form)] = json.dumps(query_json, ensure_ascii=False, separators=(",", ":"))
    form["pageNum"] = str(page)
    form["boolSearch"] = "true" if page <= 1 and new_search else "false"
    form["dstyle"] = "listmode"
    form["sortField"] = sort_code(sort)
    form["sortType"] = "desc"
    form["boolSortSearch"] = "true" if sort_request and page <= 1 else "false"
    form["sentenceSearch"] = "true" if sentence else "false"
    if "pageSize" in form:
        form["pageSize"] = str(page_size)
    if expert:
        form["aside"] = expert_aside(expert)
    if page > 1:
        form.pop("CurPage", None)
        form["turnpage"] = cursor
        form["aside"] = ""
    return form


def encode_form(form: Mapping[str, str]) -> str:
    """URL-encode the form the way the grid request sends it: keys sorted, spaces as ``+``."""
    return urlencode(sorted(form.items()))

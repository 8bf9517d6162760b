"""CNKI's professional-search (专业检索) expressions: read and checked here, written back canonically.

An expression is conditions ``FIELD op value`` joined by AND, OR and NOT (any case; NOT is binary,
"and not"), with parentheses. A value is one or more literals ('…', "…" or a bare word) joined by
``*`` (and), ``+`` (or) and ``-`` (not), with parentheses. ``=``, ``%`` and ``%=`` match text; YE and
CF also compare (``>`` ``<`` ``>=`` ``<=`` and ``BETWEEN ('a','b')``). Outside quotes, full-width
（）＝＋＊－％，＞＜ and the full-width space are read as their ASCII forms; ‘’ and “” quote like ' and ".

CNKI's help gives AND, OR and NOT one precedence, combined left to right, and asks for parentheses
(docs/site-notes.md). Other guides teach NOT > AND > OR, and the two readings differ only where OR
meets AND or NOT (or ``+`` meets ``*`` or ``-``). Such a chain is read left to right with a warning,
and what CNKI receives is the canonical rendering, bracketed wherever the readings could differ, so
the site evaluates exactly what the warning states whatever its own rule is.

Everything here is pure: no I/O, no browser. Errors are ``INVALID_EXPRESSION`` with the 1-based
character position in ``details.position`` and in the message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Channel, Plan
from cnki_mcp.core.text import first_control
from cnki_mcp.core.tool_args import EXPRESSION_MAX_CHARS
from cnki_mcp.site.grid_query import FIELDS as STRUCTURED_FIELDS
from cnki_mcp.site.grid_query import (
    CompiledQuery,
    Condition,
    Expression,
    compile_expression,
    compile_query,
    decode_expression,
)

# Field codes of CNKI's professional search, as its help and the search page's hint list them.
FIELDS: dict[str, str] = {
    "SU": "主题",
    "TKA": "篇关摘",
    "KY": "关键词",
    "TI": "篇名",
    "FT": "全文",
    "AU": "作者",
    "FI": "第一作者",
    "RP": "通讯作者",
    "AF": "作者单位",
    "FU": "基金",
    "AB": "摘要",
    "CO": "小标题",
    "RF": "参考文献",
    "CLC": "分类号",
    "LY": "文献来源",
    "JN": "期刊名称",
    "DOI": "DOI",
    "SN": "ISSN",
    "CN": "统一刊号",
    "IB": "ISBN",
    "QKLM": "栏目信息",
    "FAF": "第一单位",
    "YE": "年",
    "CF": "被引频次",
}
NUMERIC_FIELDS = frozenset({"YE", "CF"})
MATCH_OPERATORS = ("%=", "=", "%")  # longest first
COMPARISONS = (">=", "<=", ">", "<")
BETWEEN = "BETWEEN"
LOGIC = ("AND", "OR", "NOT")
VALUE_OPERATORS = "*+-"
# The grid answered only the bare empty shell for a 4393-character expression; 3633 worked.
MAX_DEPTH = 24
MAX_CLAUSES = 200

_WIDE = str.maketrans("（）＝＋＊－％，＞＜\u3000", "()=+*-%,>< ")
_SINGLE, _DOUBLE = "'‘’", '"“”'
_SYNTAX = "()=%*+-,<>"


# --- the tree ---------------------------------------------------------------------------------------


class Word(msgspec.Struct, frozen=True):
    """One literal of a value."""

    text: str


class WordOp(msgspec.Struct, frozen=True):
    """Literals combined inside one field: ``*`` and, ``+`` or, ``-`` and not."""

    op: str
    left: Word | WordOp
    right: Word | WordOp


class Range(msgspec.Struct, frozen=True):
    """``BETWEEN ('low','high')``, both ends included."""

    low: str
    high: str


class Clause(msgspec.Struct, frozen=True):
    """``FIELD op value``: one condition on one field."""

    field: str
    op: str
    value: Word | WordOp | Range


class Join(msgspec.Struct, frozen=True):
    """Conditions combined: AND, OR, or NOT (the left side and not the right)."""

    op: str
    left: Clause | Join
    right: Clause | Join


Node = Clause | Join
Value = Word | WordOp


class Parsed(msgspec.Struct, frozen=True):
    tree: Node
    warnings: list[str] = []


def _error(position: int, reason: str) -> CnkiError:
    return CnkiError(
        "INVALID_EXPRESSION",
        f"专业检索表达式第 {position} 个字符处有误：{reason}",
        details={"position": position},
    )


# --- reading ----------------------------------------------------------------------------------------


class _Token(msgspec.Struct, frozen=True):
    kind: str  # ( ) , op vop word string end
    text: str
    position: int  # 1-based, in the text as given


def _is_word_char(ch: str) -> bool:
    return not (ch.isspace() or ch in _SYNTAX or ch in _SINGLE or ch in _DOUBLE)


def _quoted(text: str, start: int) -> tuple[_Token, int]:
    family = _SINGLE if text[start] in _SINGLE else _DOUBLE
    end = start + 1
    while end < len(text) and text[end] not in family:
        end += 1
    if end == len(text):
        raise _error(start + 1, f"引号 {text[start]} 没有配对的结束引号。")
    return _Token("string", text[start + 1 : end], start + 1), end + 1


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        ch = text[i].translate(_WIDE)
        if ch.isspace():
            i += 1
        elif text[i] in _SINGLE or text[i] in _DOUBLE:
            token, i = _quoted(text, i)
            tokens.append(token)
        elif ch in "(),":
            tokens.append(_Token(ch, ch, i + 1))
            i += 1
        elif ch in "=%<>":
            pair = ch + text[i + 1 : i + 2].translate(_WIDE)
            size = 2 if pair in ("%=", ">=", "<=") else 1
            tokens.append(_Token("op", pair[:size], i + 1))
            i += size
        elif ch in VALUE_OPERATORS:
            glued = 0 < i < len(text) - 1 and _is_word_char(text[i - 1].translate(_WIDE)) and _is_word_char(
                text[i + 1].translate(_WIDE)
            )
            if ch == "-" and glued:
                raise _error(
                    i + 1,
                    f"“-”夹在检索词中间（{_word_around(text, i)}），知网会把它当作“不含”运算符；它若是检索词的一部分，"
                    f"请用引号把整个词括起来（如 '{_word_around(text, i)}'），若是运算符，请在前后各加一个空格。",
                )
            tokens.append(_Token("vop", ch, i + 1))
            i += 1
        else:
            start = i
            while i < len(text) and _is_word_char(text[i].translate(_WIDE)):
                i += 1
            tokens.append(_Token("word", text[start:i], start + 1))
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


def _word_around(text: str, index: int) -> str:
    """The hyphenated word around ``text[index]``, as written."""
    flat = text.translate(_WIDE)
    start, end = index, index + 1
    while start > 0 and (_is_word_char(flat[start - 1]) or flat[start - 1] == "-"):
        start -= 1
    while end < len(flat) and (_is_word_char(flat[end]) or flat[end] == "-"):
        end += 1
    return text[start:end]


def _digits(text: str, position: int, field: str) -> str:
    if not text.isdigit() or not text.isascii():
        raise _error(position, f"{field}（{FIELDS[field]}）的值须为数字，收到 {text!r}。")
    return text


class _Reader:
    """Recursive descent over the tokens; one precedence for AND/OR/NOT and for * + -, left to right."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.at = 0
        self.clauses = 0
        self.warnings: list[str] = []

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def logic(self) -> str:
        token = self.token
        return token.text.upper() if token.kind == "word" and token.text.upper() in LOGIC else ""

    def expression(self, depth: int) -> Node:
        start = self.token.position
        node = self.clause(depth)
        ops: list[str] = []
        while op := self.logic():
            where = self.take().position
            if self.token.kind in ("end", ")") or self.logic():
                raise _error(where, f"{op} 后面缺少检索条件，请补上条件或删去这个运算符。")
            node = Join(op, node, self.clause(depth))
            ops.append(op)
        if "OR" in ops and len(set(ops)) > 1:
            self.warn(start, "OR 与 AND/NOT", node)
        return node

    def bracketed(self, depth: int, inner: Callable[[int], Any]) -> Any:
        """``( … )`` around what ``inner`` reads; an unclosed one is reported where it opens."""
        opening = self.take()
        if depth >= MAX_DEPTH:  # depth counts the brackets already open: this one is number depth + 1
            raise _error(opening.position, f"括号嵌套超过 {MAX_DEPTH} 层，请简化表达式。")
        node = inner(depth + 1)
        if self.token.kind != ")":
            raise _error(opening.position, "这个左括号没有配对的右括号，请补上“)”。")
        self.take()
        return node

    def clause(self, depth: int) -> Node:
        token = self.token
        if token.kind == "(" and self.tokens[self.at + 1].kind == ")":
            raise _error(token.position + 1, "括号里没有检索条件，请补上条件或删去这对括号。")
        if token.kind == "(":
            node: Node = self.bracketed(depth, self.expression)
            return node
        if token.kind == "word" and token.text.upper() in LOGIC:
            raise _error(token.position, f"{token.text.upper()} 前面缺少检索条件（NOT 的写法是 A NOT B），请补上条件或删去它。")
        if token.kind == "word":
            code = token.text.upper()
            if code not in FIELDS:
                raise _error(token.position, f"未知的检索字段 {token.text}；可用字段：{'、'.join(FIELDS)}。")
            self.take()
            self.clauses += 1
            if self.clauses > MAX_CLAUSES:
                raise _error(token.position, f"检索条件超过 {MAX_CLAUSES} 个，请拆成几次检索。")
            return self.condition(code, token, depth)
        if token.kind == "end":
            raise _error(token.position, "表达式在这里结束，缺少检索条件，请补全。")
        if token.kind == ")":
            raise _error(token.position, "多余的右括号，请删去它或补上对应的左括号。")
        raise _error(token.position, f"这里应是检索字段（如 SU、TI、AU），收到 {token.text!r}。")

    def condition(self, field: str, name: _Token, depth: int) -> Clause:
        token = self.token
        if token.kind == "word" and token.text.upper() == BETWEEN:
            self.take()
            return Clause(field, BETWEEN, self.range(field, token))
        if token.kind != "op":
            raise _error(token.position, f"字段 {name.text} 后面缺少匹配运算符（=、% 或 %=）。")
        self.take()
        numeric = field in NUMERIC_FIELDS
        if token.text in COMPARISONS and not numeric:
            raise _error(token.position, f"只有 YE、CF 可以用 {token.text} 比较；{field} 请用 =、% 或 %=。")
        if numeric and token.text in ("%", "%="):
            raise _error(token.position, f"{field} 只能用 =、>、<、>=、<= 或 BETWEEN。")
        first = self.token
        value = self.value(depth)
        if numeric and not isinstance(value, Word):
            raise _error(first.position, f"{field} 的值只能是一个数字。")
        if numeric and isinstance(value, Word):
            _digits(value.text, first.position, field)
        return Clause(field, token.text, value)

    def range(self, field: str, keyword: _Token) -> Range:
        if field not in NUMERIC_FIELDS:
            raise _error(keyword.position, f"只有 YE、CF 可以用 BETWEEN；{field} 请用 =、% 或 %=。")
        ends: list[str] = []
        for expected in ("(", "value", ",", "value", ")"):
            token = self.take()
            if expected == "value" and token.kind in ("string", "word"):
                ends.append(_digits(token.text.strip(), token.position, field))
            elif token.kind != expected:
                raise _error(token.position, f"BETWEEN 的写法是 {field} BETWEEN ('起', '止')。")
        return Range(ends[0], ends[1])

    def value(self, depth: int) -> Value:
        start = self.token.position
        node = self.literal(depth)
        ops: list[str] = []
        while self.token.kind == "vop":
            op = self.take()
            if self.token.kind in ("end", ")", "vop") or self.logic():
                raise _error(op.position, f"{op.text} 后面缺少检索词，请补上检索词或删去这个运算符。")
            node = WordOp(op.text, node, self.literal(depth))
            ops.append(op.text)
        if "+" in ops and len(set(ops)) > 1:
            self.warn(start, "+ 与 * 或 -", node)
        return node

    def literal(self, depth: int) -> Value:
        token = self.token
        if token.kind == "(":
            node: Value = self.bracketed(depth, self.value)
            return node
        if token.kind == "vop":
            raise _error(token.position, f"{token.text} 前面缺少检索词，请补上检索词或删去这个运算符。")
        if token.kind == "string" or (token.kind == "word" and token.text.upper() not in LOGIC):
            self.take()
            text = token.text.strip()
            if not text:
                raise _error(token.position, "检索词为空，请填写检索词或删去这个条件。")
            return Word(text)
        raise _error(token.position, "这里缺少检索词（用引号括起，如 '数字经济'）。")

    def warn(self, start: int, mixed: str, node: Any) -> None:
        self.warnings.append(
            f"专业检索表达式第 {start} 个字符起混用了 {mixed} 而没有括号。按知网帮助，同级运算符优先级相同、"
            f"从左到右组合，本次按 {render(node)} 检索；如果想要别的组合，请用括号写明。"
        )


def parse(text: str) -> Parsed:
    """The expression as a tree (left-assoc, one precedence), with warnings; INVALID_EXPRESSION otherwise."""
    if len(text) > EXPRESSION_MAX_CHARS:
        raise _error(EXPRESSION_MAX_CHARS + 1, f"表达式超过 {EXPRESSION_MAX_CHARS} 个字符，知网不接受这么长的专业检索表达式，请拆成几次检索。")
    control = first_control(text)
    if control >= 0:
        raise _error(
            control + 1,
            f"表达式第 {control + 1} 个字符是看不见的控制字符（U+{ord(text[control]):04X}，如 NUL、ESC 或文字方向控制符），"
            "会让检索条件与看到的不同；请删去它后重试。",
        )
    reader = _Reader(text)
    if reader.token.kind == "end":
        raise _error(1, "表达式为空。")
    tree = reader.expression(0)
    token = reader.token
    if token.kind == ")":
        raise _error(token.position, "多余的右括号，请删去它或补上对应的左括号。")
    if token.kind != "end":
        raise _error(
            token.position,
            f"{token.text!r} 之前缺少逻辑运算符（AND、OR、NOT）；检索词含空格或运算符时请用引号括起。",
        )
    return Parsed(tree, reader.warnings)


# --- writing ----------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    if not any(ch in _SINGLE for ch in text):
        return f"'{text}'"
    if not any(ch in _DOUBLE for ch in text):
        return f'"{text}"'
    raise ValueError(f"a literal with both kinds of quotes cannot be written: {text!r}")


def _spine(node: Any) -> list[tuple[str, Any]]:
    """A left-leaning chain of one operator, flattened: [("", first), (op, right), …]."""
    parts: list[tuple[str, Any]] = []
    op = node.op
    while isinstance(node, (Join, WordOp)) and node.op == op:
        parts.append((node.op, node.right))
        node = node.left
    parts.append(("", node))
    return parts[::-1]


def _bracket(op: str, child: Any, first: bool, mixed: str) -> bool:
    """Whether a child of an ``op`` chain needs parentheses: every compound right side, and a left side
    whose operator differs when the two readings of precedence differ (``mixed`` is OR or +)."""
    if not isinstance(child, (Join, WordOp)):
        return False
    return not first or (child.op != op and mixed in (child.op, op))


def _chain(node: Join | WordOp, mixed: str, gap: str, leaf: Any) -> str:
    out = []
    for i, (op, child) in enumerate(_spine(node)):
        text = _chain(child, mixed, gap, leaf) if isinstance(child, type(node)) else leaf(child)
        if _bracket(node.op, child, i == 0, mixed):
            text = f"({text})"
        out.append(f"{gap}{op}{gap}{text}" if op else text)
    return "".join(out)


def _value(node: Value | Range) -> str:
    if isinstance(node, Range):
        return f"({_quote(node.low)}, {_quote(node.high)})"
    if isinstance(node, Word):
        return _quote(node.text)
    return "(" + _chain(node, "+", "", lambda word: _quote(word.text)) + ")"


def _clause(clause: Clause) -> str:
    gap = "" if clause.op == "=" else " "
    return f"{clause.field}{gap}{clause.op}{gap}{_value(clause.value)}"


def render(node: Node | Value) -> str:
    """The canonical expression: ASCII syntax, upper-case codes and operators, every literal quoted."""
    if isinstance(node, Join):
        return _chain(node, "OR", " ", _clause)
    if isinstance(node, Clause):
        return _clause(node)
    return _value(node)


# --- structured_search's tree as an expression ------------------------------------------------------------

# The advanced form's ST is 小标题; professional search writes it CO.
_PROFESSIONAL_CODES = {"ST": "CO"}


def _leaf(field: str, value: str, match: str) -> Clause:
    code = STRUCTURED_FIELDS[field][0]
    if match == "exact":
        op = "="
    else:
        op = "%=" if field == "subject" else "%"
    return Clause(_PROFESSIONAL_CODES.get(code, code), op, Word(value.strip()))


def _fold(op: str, nodes: list[Node]) -> Node:
    tree = nodes[0]
    for node in nodes[1:]:
        tree = Join(op, tree, node)
    return tree


def _each(nodes: list[Expression]) -> list[Node] | None:
    parts = [_structure(node) for node in nodes]
    kept = [part for part in parts if part is not None]
    return kept if len(kept) == len(parts) else None


def _structure(node: Expression) -> Node | None:
    """The tree kept as it is where binary NOT can say it (a ``not`` inside an ``and``); else None."""
    if not node.op:
        return _leaf(node.field, node.value, node.match)
    if node.op == "or":
        parts = None if any(child.op == "not" for child in node.items) else _each(node.items)
        return _fold("OR", parts) if parts else None
    if node.op != "and":
        return None
    # not(not(x)) is x; any other not is the right side of a NOT after the positive conditions.
    unwrapped = [child.items[0].items[0] if child.op == "not" and child.items[0].op == "not" else child for child in node.items]
    positive = _each([child for child in unwrapped if child.op != "not"])
    negative = _each([child.items[0] for child in unwrapped if child.op == "not"])
    if not positive or negative is None:
        return None
    tree = _fold("AND", positive)
    for part in negative:
        tree = Join("NOT", tree, part)
    return tree


def _branches(branches: list[list[Condition]]) -> Node:
    """The OR of AND-branches structured_search sends, each branch's negations last."""
    joined = []
    for branch in branches:
        tree = _fold("AND", [_leaf(c.field, c.value, c.match) for c in branch if not c.negated])
        for condition in branch:
            if condition.negated:
                tree = Join("NOT", tree, _leaf(condition.field, condition.value, condition.match))
        joined.append(tree)
    return _fold("OR", joined)


def from_structured(expression: Any, branches: list[list[Condition]] | None = None) -> str:
    """structured_search's (already checked) tree as a professional-search expression, without the
    years (``branches``: the tree as already compiled); "" when a value holds both kinds of quotes and cannot
    be written."""
    tree = _structure(decode_expression(expression)) or _branches(
        compile_expression(expression) if branches is None else branches
    )
    try:
        return render(tree)
    except ValueError:
        return ""


# --- the plan -----------------------------------------------------------------------------------------


def canonical_expression(text: str) -> tuple[str, list[str]]:
    """The expression read and written back canonically for CNKI, with its warnings; INVALID_EXPRESSION
    with the position when it cannot be read or its canonical form is longer than CNKI accepts."""
    parsed = parse(text)
    canonical = render(parsed.tree)
    if len(canonical) > EXPRESSION_MAX_CHARS:
        raise _error(
            1, f"表达式写成知网格式后有 {len(canonical)} 个字符，超过 {EXPRESSION_MAX_CHARS} 个，知网不接受这么长的专业检索表达式。"
        )
    return canonical, list(parsed.warnings)


def expert_plan(canonical: str, warnings: list[str]) -> Plan:
    """The search of an expression: one ``expert`` channel carrying its canonical form, and warnings."""
    channel = Channel(name="expert", weight=1.0, expert=canonical)
    return Plan(channels=[channel], method="expert", warnings=list(warnings))


def plan_expression(plan: Plan, compiled: CompiledQuery | None = None) -> str:
    """The professional-search expression of a structured or expert plan ("" for other searches);
    ``compiled``: its channel as already compiled."""
    if not plan.channels:
        return ""
    channel = plan.channels[0]
    if plan.method == "expert":
        return channel.expert
    if plan.method == "structured":
        if compiled is None:
            compiled = compile_query(channel.expression)
        # A 句子检索 has no professional-search form this product could vouch for.
        return "" if compiled.sentence is not None else from_structured(channel.expression, compiled.branches)
    return ""


"""Professional-search (专业检索) expressions as the simulator reads them: the ``EXPERT`` item of a QueryJson.

Written apart from the product's reader on purpose, since it is the oracle the product is checked
against. It is strict where CNKI's help is: half-width syntax only, AND/OR/NOT (any case) with a space
on each side, literals quoted with ' or " or written bare. AND, OR and NOT share one precedence and so
do ``*`` ``+`` ``-``, combined left to right, as CNKI's help describes. A literal is one token, matched
with the same rules as the advanced form's items (``query.match_value``); YE compares the year and CF
the citation count (=, >, <, >=, <=, BETWEEN).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from .corpus import Paper

Test = Callable[[Paper], bool]

_TOKENS = re.compile(
    r"(?P<quoted>'[^']*'|\"[^\"]*\")|(?P<compare>%=|>=|<=|[=%<>])|(?P<mark>[(),*+\-])|(?P<bare>[^\s()'\"=%<>,*+\-]+)|(?P<space>\s+)"
)
LOGIC = {"AND", "OR", "NOT"}
# Field codes the simulator indexes (JN is the journal name, read as LY; AUC an author's code, as the author
# page and the grid's author facet know it); others CNKI lists are refused.
CODES = {"SU", "TKA", "KY", "TI", "FT", "AU", "FI", "RP", "AF", "FU", "AB", "CO", "RF", "CLC", "LY", "DOI", "FAF",
         "JN", "YE", "CF", "AUC"}
NOT_INDEXED = {"SN", "CN", "IB", "QKLM"}
NUMBERS = {"YE": "year", "CF": "cited"}
RELEVANCE_CODES = {"SU", "TI", "TKA", "KY"}
SYNTAX_ERROR = "专业检索表达式语法错误，请检查后重新检索"


def unsupported(code: str) -> str:
    """The refusal of a field code (invented wording: no source shows CNKI's)."""
    return f"专业检索表达式有误：不支持的检索字段 {code}"


class ExpertRefused(ValueError):
    """CNKI's answer to an expression it does not accept: a refusal with this reason."""


@dataclass(frozen=True)
class Compiled:
    test: Test
    codes: frozenset[str]  # every field code the expression uses
    terms: tuple[str, ...]  # literals of positive SU/TI/TKA/KY conditions (for relevance)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    spaced: bool  # whitespace (or the edge of the text) on both sides


def _tokens(text: str) -> list[_Tok]:
    found: list[tuple[str, str, int, int]] = []
    at = 0
    while at < len(text):
        m = _TOKENS.match(text, at)
        if m is None:
            raise ExpertRefused(SYNTAX_ERROR)
        if m.lastgroup != "space":
            found.append((m.lastgroup or "", m.group(), m.start(), m.end()))
        at = m.end()
    out = []
    for kind, word, start, end in found:
        before = start == 0 or text[start - 1].isspace()
        after = end == len(text) or text[end].isspace()
        out.append(_Tok(kind, word, before and after))
    return out


def _numeric(attr: str, op: str, low: int, high: int) -> Test:
    compare = {
        "=": lambda v: v == low, ">": lambda v: v > low, "<": lambda v: v < low,
        ">=": lambda v: v >= low, "<=": lambda v: v <= low, "BETWEEN": lambda v: low <= v <= high,
    }[op]
    return lambda paper: compare(int(getattr(paper, attr) or 0))


class _Reader:
    def __init__(self, text: str, match: Callable[[Paper, str, str, str], bool]) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.match = match
        self.codes: set[str] = set()
        self.terms: list[str] = []

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self, kind: str | None = None, text: str | None = None) -> _Tok:
        tok = self.peek()
        if tok is None or (kind and tok.kind != kind) or (text and tok.text != text):
            raise ExpertRefused(SYNTAX_ERROR)
        self.i += 1
        return tok

    def logic(self) -> str:
        tok = self.peek()
        if tok is None or tok.kind != "bare" or tok.text.upper() not in LOGIC:
            return ""
        if not tok.spaced:
            raise ExpertRefused(SYNTAX_ERROR)  # 逻辑运算符前后要空一个字节
        return tok.text.upper()

    def conditions(self, negated: bool) -> Test:
        test = self.condition(negated)
        while op := self.logic():
            self.i += 1
            left, right = test, self.condition(negated != (op == "NOT"))
            if op == "AND":
                test = (lambda a, b: lambda p: a(p) and b(p))(left, right)
            elif op == "OR":
                test = (lambda a, b: lambda p: a(p) or b(p))(left, right)
            else:
                test = (lambda a, b: lambda p: a(p) and not b(p))(left, right)
        return test

    def condition(self, negated: bool) -> Test:
        tok = self.next()
        if tok.text == "(":
            test = self.conditions(negated)
            self.next("mark", ")")
            return test
        code = tok.text
        if tok.kind != "bare" or not re.fullmatch("[A-Z]+", code) or code in LOGIC:
            raise ExpertRefused(SYNTAX_ERROR)
        if code in NOT_INDEXED or code not in CODES:
            raise ExpertRefused(unsupported(code))
        self.codes.add(code)
        if code in NUMBERS:
            return self.number(code)
        op = self.next("compare").text
        if op not in ("=", "%", "%="):
            raise ExpertRefused(SYNTAX_ERROR)
        return self.words("LY" if code == "JN" else code, op, negated)

    def number(self, code: str) -> Test:
        tok = self.next()
        if tok.kind == "bare" and tok.text.upper() == "BETWEEN":
            self.next("mark", "(")
            low = self.digits()
            self.next("mark", ",")
            high = self.digits()
            self.next("mark", ")")
            return _numeric(NUMBERS[code], "BETWEEN", low, high)
        if tok.kind != "compare" or tok.text in ("%", "%="):
            raise ExpertRefused(SYNTAX_ERROR)
        return _numeric(NUMBERS[code], tok.text, self.digits(), 0)

    def digits(self) -> int:
        text = self.next().text.strip("'\"")
        if not text.isdigit():
            raise ExpertRefused(SYNTAX_ERROR)
        return int(text)

    def words(self, code: str, op: str, negated: bool) -> Test:
        test = self.word(code, op, negated)
        while (tok := self.peek()) is not None and tok.kind == "mark" and tok.text in "*+-":
            self.i += 1
            left, right = test, self.word(code, op, negated != (tok.text == "-"))
            if tok.text == "*":
                test = (lambda a, b: lambda p: a(p) and b(p))(left, right)
            elif tok.text == "+":
                test = (lambda a, b: lambda p: a(p) or b(p))(left, right)
            else:
                test = (lambda a, b: lambda p: a(p) and not b(p))(left, right)
        return test

    def word(self, code: str, op: str, negated: bool) -> Test:
        tok = self.next()
        if tok.text == "(":
            test = self.words(code, op, negated)
            self.next("mark", ")")
            return test
        if tok.kind not in ("quoted", "bare") or tok.text.upper() in LOGIC:
            raise ExpertRefused(SYNTAX_ERROR)
        literal = tok.text[1:-1].strip() if tok.kind == "quoted" else tok.text
        if not literal:
            raise ExpertRefused(SYNTAX_ERROR)
        if code in RELEVANCE_CODES and not negated:
            self.terms.append(literal)
        return lambda paper: self.match(paper, code, op, literal)


@functools.lru_cache(maxsize=256)
def _compiled(text: str, match: Callable[[Paper, str, str, str], bool]) -> Compiled:
    reader = _Reader(text, match)
    if not reader.toks:
        raise ExpertRefused(SYNTAX_ERROR)
    test = reader.conditions(False)
    if reader.peek() is not None:
        raise ExpertRefused(SYNTAX_ERROR)
    return Compiled(test, frozenset(reader.codes), tuple(reader.terms))


def compile_expert(text: str, match: Callable[[Paper, str, str, str], bool]) -> Compiled:
    """The expression as a test on papers; ExpertRefused with CNKI-like reasons when it is not accepted.

    ``match(paper, code, op, literal)`` tests one literal as one token (the advanced form's rules)."""
    return _compiled(text, match)

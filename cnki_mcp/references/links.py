"""link_references: find 《title》 spans in text and turn the resolvable ones into CNKI links.

Spans nest (《论《民法典》违约金》 is one title); existing Markdown links and code spans are left
alone. An unclosed 《 swallows the rest of the text, as a reader would read it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec


class Span(msgspec.Struct, frozen=True):
    start: int  # index of the outer 《
    end: int  # index just past the outer 》
    title: str


class Match(msgspec.Struct, frozen=True):
    record_ref: str
    url: str = ""


class Reference(msgspec.Struct):
    title: str
    status: str  # linked | matched_without_link | ambiguous | unresolved
    record_refs: list[str]


def _skip_code(text: str, at: int) -> int:
    run = at
    while run < len(text) and text[run] == "`":
        run += 1
    fence = text[at:run]
    closing = text.find(fence, run)
    return closing + len(fence) if closing >= 0 else run


def _skip_link(text: str, at: int) -> int | None:
    middle = text.find("](", at + 1)
    if middle < 0:
        return None
    close = text.find(")", middle + 2)
    return close + 1 if close >= 0 else None


def find_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "`":
            i = _skip_code(text, i)
            continue
        if char == "[":
            after = _skip_link(text, i)
            if after is not None:
                i = after
                continue
        if char == "《":
            depth, j = 1, i + 1
            while j < len(text) and depth:
                if text[j] == "《":
                    depth += 1
                elif text[j] == "》":
                    depth -= 1
                j += 1
            if depth:
                break  # unclosed: the rest of the text belongs to it
            spans.append(Span(start=i, end=j, title=text[i + 1 : j - 1]))
            i = j
            continue
        i += 1
    return spans


def _markdown_link(label: str, url: str) -> str:
    escaped = label.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    target = url.replace("(", "%28").replace(")", "%29")
    return f"[{escaped}]({target})"


def render(text: str, spans: list[Span], lookup: Callable[[str], list[Match]]) -> tuple[str, list[Reference]]:
    """Rewrite ``text`` with a link for every span that resolves to exactly one record with a URL."""
    pieces: list[str] = []
    references: list[Reference] = []
    cursor = 0
    for span in spans:
        pieces.append(text[cursor : span.start])
        original = text[span.start : span.end]
        matches = lookup(span.title)
        refs = [m.record_ref for m in matches]
        if not matches:
            status, replacement = "unresolved", original
        elif len(matches) > 1:
            status, replacement = "ambiguous", original
        elif not matches[0].url:
            status, replacement = "matched_without_link", original
        else:
            status, replacement = "linked", _markdown_link(original, matches[0].url)
        pieces.append(replacement)
        references.append(Reference(title=span.title, status=status, record_refs=refs))
        cursor = span.end
    pieces.append(text[cursor:])
    return "".join(pieces), references

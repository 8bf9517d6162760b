"""check_references: a reference list checked entry by entry against CNKI.

Each entry is read (``reflist``), looked up on CNKI by a phrase of its title (``Enrichment.lookup_titles``:
ten phrases per grid request, Han and Latin titles in separate requests), matched to the record it means
(``refcompare.choose``), completed from the record's detail page (``Enrichment.enrich``) and compared
field by field. ``corrected`` is the record in the chosen style exactly as ``export_citations`` renders
it alone, without its leading number.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Sequence

from cnki_mcp.core.hanzi import has_han, simplified
from cnki_mcp.core.model import Paper, Problem
from cnki_mcp.core.refcheck_model import CheckedReference, CheckResult, CheckSummary, ParsedReference, ReferenceCandidate
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.references.citations import prose_entries
from cnki_mcp.references.refcompare import TRANSLATED, choose, differences, match_key, not_compared, title_relation
from cnki_mcp.references.reflist import Entry, line_count, read_entry
from cnki_mcp.research.enrich import Enrichment

# A search phrase longer than this is cut (CNKI refuses values over 120 characters).
PHRASE_MAX_CHARS = 100
_MIN_PHRASE_CHARS = 4
# Title punctuation of every width, and spaces beside Han characters (titles are written with and
# without them); a phrase is a run without either. Hyphens, apostrophes and spaces between words stay.
_PHRASE_BREAK = re.compile(r"[^\w\s\-'’]|_")
_SPACE_BY_HAN = re.compile(r"(?<=[\u3400-\u9fff])\s+|\s+(?=[\u3400-\u9fff])")
_LEADING_NUMBER = re.compile(r"^(?:\[\d+\]|\d+\.)\s*")

# GB/T 7714 type codes of what CNKI holds little or nothing of, and what they are called.
_NOT_HELD = dict(
    M="图书", S="标准", P="专利", R="报告", EB="网络资源", DB="数据库", CP="计算机程序", DS="数据集", A="析出文献", G="汇编", Z="其他文献"
)


def search_phrase(title: str) -> str:
    """What is sent to CNKI for a title: its longest run without punctuation, in simplified characters
    (the whole title when no run has four characters).

    CNKI's exact 篇名 match finds a phrase inside a title, so a run of the title finds the record whatever
    punctuation (full- or half-width, 《》, quotes) or subtitle the entry wrote; the records are then
    compared with the whole title.
    """
    text = unicodedata.normalize("NFKC", simplified(title))
    runs = [run.strip(" -'’") for part in _PHRASE_BREAK.split(text) for run in _SPACE_BY_HAN.split(part)]
    runs = [run for run in runs if run]
    longest = max(runs, key=len, default="")
    phrase = longest if len(longest) >= _MIN_PHRASE_CHARS else " ".join(runs)
    return phrase[:PHRASE_MAX_CHARS].strip()


def related(phrase: str, row_title: str) -> bool:
    """Whether a listed title belongs to a phrase of one request: it holds the phrase, or (an English
    phrase) it is a Chinese title, which CNKI finds by its English title."""
    return match_key(phrase) in match_key(row_title) or (not has_han(phrase) and has_han(row_title))


def corrected_text(paper: Paper, style: str) -> str:
    """``paper`` in ``style`` as export_citations renders it alone, without the leading number."""
    return _LEADING_NUMBER.sub("", prose_entries([paper], style)[0][1], count=1)


def _candidate(paper: Paper) -> ReferenceCandidate:
    return ReferenceCandidate(
        record_ref=paper.record_ref,
        title=paper.title,
        authors=list(paper.authors),
        year=paper.year,
        source=paper.source,
        document_type=paper.document_type,
    )


def not_found_message(parsed: ParsedReference) -> str:
    """Why a title was not found, and that this does not prove the entry invented."""
    kind = _NOT_HELD.get(parsed.type_code, "")
    why = f"这一条是{kind}（[{parsed.type_code}]），这类文献知网收录很少或不收录" if kind else ""
    if not why and not has_han(parsed.title):
        why = "这一条是外文文献，知网收录的外文文献有限"
    if not why:
        why = "图书、外文文献和灰色文献（报告、会议资料、网页等）常常不在知网收录范围内"
    return (
        f"知网上没有找到题名为《{parsed.title}》的文献。这不能证明这条参考文献是编造的：{why}。"
        "请到其他数据库、图书馆目录或出版社网站核实；如果题名写错了，改正后再核对一次。"
    )


def _unchecked(index: int, entry: Entry, problem: Problem) -> CheckedReference:
    return CheckedReference(
        index=index,
        input=entry.text,
        status="unchecked",
        parsed=entry.parsed,
        message=f"查找时出错（{problem.code}）：{problem.message} 这一条没有核对；稍后再调用一次 check_references 即可。",
    )


def summarize(entries: Sequence[CheckedReference], lines: int = 0) -> CheckSummary:
    summary = CheckSummary(total=len(entries), lines=lines)
    for entry in entries:
        setattr(summary, entry.status, getattr(summary, entry.status) + 1)
    return summary


async def check(
    op: OperationContext, engine: Enrichment, texts: Sequence[str], style: str, pasted: str = ""
) -> CheckResult:
    """Every entry of ``texts`` checked against CNKI, in order; per-entry failures never fail the others.
    ``pasted``: the list ``texts`` were read from, if any (the summary counts its lines)."""
    op.stage("parse")
    # In a worker thread: parsing a few hundred entries takes a moment the other clients must not wait for.
    entries = await asyncio.to_thread(lambda: [read_entry(text) for text in texts])
    phrases = {i: search_phrase(entry.parsed.title) for i, entry in enumerate(entries) if not entry.why}
    op.stage("locate")
    found, failed = await _lookup(op, engine, list(dict.fromkeys(phrases.values())))
    papers = engine.store.data.papers
    chosen: dict[int, Paper] = {}
    tied: dict[int, list[Paper]] = {}
    for i, phrase in phrases.items():
        parsed = entries[i].parsed
        rows = [papers[ref] for ref in found.get(phrase, []) if ref in papers]
        candidates = [(paper, rel) for paper in rows if (rel := title_relation(parsed.title, paper.title))]
        paper, leaders = choose(parsed, candidates)
        if paper is not None:
            chosen[i] = paper
        elif leaders:
            tied[i] = leaders
    op.stage("details")
    # The detail page gives volume, issue, pages and DOI; a failed one still leaves the listing's record.
    fatal = await engine.enrich(
        op, list(dict.fromkeys(p.record_ref for p in chosen.values())), "details", quality=False, record_errors=False
    )
    if fatal is not None:
        raise fatal
    results: list[CheckedReference] = []
    for i, entry in enumerate(entries):
        index = i + 1
        parsed = entry.parsed
        if entry.why:
            results.append(CheckedReference(index=index, input=entry.text, status="unparsed", message=entry.why))
        elif phrases[i] in failed:
            results.append(_unchecked(index, entry, failed[phrases[i]]))
        elif i in chosen:
            results.append(_matched(index, entry, papers.get(chosen[i].record_ref, chosen[i]), style))
        elif i in tied:
            results.append(_ambiguous(index, entry, tied[i]))
        else:
            results.append(
                CheckedReference(
                    index=index, input=entry.text, status="not_found", parsed=parsed, message=not_found_message(parsed)
                )
            )
    return CheckResult(style=style, entries=results, summary=summarize(results, line_count(pasted)))


async def _lookup(
    op: OperationContext, engine: Enrichment, phrases: list[str]
) -> tuple[dict[str, list[str]], dict[str, Problem]]:
    """CNKI's records under each phrase, and the phrases whose request failed.

    Han and Latin phrases go in separate requests, so a Chinese row under an English phrase was found by
    the English title of that request (``choose`` still wants its first author to agree).
    """
    found: dict[str, list[str]] = {}
    failed: dict[str, Problem] = {}
    for script in (True, False):
        batch = [phrase for phrase in phrases if has_han(phrase) == script]
        if batch:
            located, problems = await engine.lookup_titles(op, batch, related)
            found |= located
            failed |= problems
    return found, failed


def _ambiguous(index: int, entry: Entry, leaders: list[Paper]) -> CheckedReference:
    return CheckedReference(
        index=index,
        input=entry.text,
        status="ambiguous",
        parsed=entry.parsed,
        candidates=[_candidate(paper) for paper in leaders],
        message=(
            f"知网上有 {len(leaders)} 篇文献与这个题名相符，这一条给出的作者、年份、来源不足以确定是哪一篇；"
            "请补充这些信息后再核对，或从 candidates 中选出 record_ref。"
        ),
    )


def _matched(index: int, entry: Entry, paper: Paper, style: str) -> CheckedReference:
    parsed = entry.parsed
    relation = title_relation(parsed.title, paper.title) or TRANSLATED
    found = differences(parsed, paper, relation)
    unknown = not_compared(parsed, paper, relation)
    if found:
        fields = "、".join(difference.field for difference in found)
        status = "differs"
        message = f"在知网找到了这篇文献，但 {fields} 与知网记录不一致；可以用 corrected 中的条目替换。"
    else:
        status = "verified"
        message = "在知网找到了这篇文献，给出的各项与知网记录一致。"
    if unknown:
        message += f"知网记录中没有可比对的 {'、'.join(unknown)}，这几项未能核对。"
    return CheckedReference(
        index=index,
        input=entry.text,
        status=status,
        message=message,
        parsed=parsed,
        record_ref=paper.record_ref,
        differences=found,
        not_compared=unknown,
        corrected=corrected_text(paper, style),
    )

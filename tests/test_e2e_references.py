"""check_references end to end: the real MCP client, `python -m cnki_mcp serve`, headless Chromium, the simulator.

A 30-entry reference list written by hand from the simulator's corpus, the way people write them: GB/T
7714 numeric and author-date, APA, Vancouver, 《》 lines; full-width punctuation, traditional characters,
en dashes, 等, pinyin names, an English title of a Chinese paper. Some entries carry one wrong fact (year,
pages, author order, issue, a missing subtitle), some are invented or not on CNKI, one title belongs to two
records, two lines are no references at all. Every entry must get its status, its differing fields and
its record; ``corrected`` must equal what export_citations gives for that record. The test prints the
accuracy table and the requests each checked entry cost.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import opencc
import pytest
import pytest_asyncio

from tests.harness import McpSession, chromium_path, serve_params
from tests.kns.corpus import TRANSLATED_TITLES
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

_TRADITIONAL = opencc.OpenCC("s2t")
_FULL_WIDTH = {code - 0xFEE0: code for code in range(0xFF01, 0xFF5F)} | {0x20: 0x3000}


@dataclass
class Case:
    category: str
    text: str
    status: str
    paper: SimPaper | None = None  # the record it must match
    fields: list[str] = field(default_factory=list)  # the fields that must differ


def _names(authors: list[str]) -> str:
    return ", ".join(authors)


def _serial(p: SimPaper, year: int | None = None, issue: str | None = None) -> str:
    volume = p.volume
    return f"{year or p.year}, {volume}({issue or p.issue})" if volume else f"{year or p.year}({issue or p.issue})"


def gbt(p: SimPaper, *, authors: str | None = None, title: str | None = None, year: int | None = None,
        pages: str | None = None, issue: str | None = None) -> str:
    """A GB/T 7714 numeric journal entry as people write it (the number is added later)."""
    names = _names(p.authors) if authors is None else authors
    return f"{names}. {title or p.title}[J]. {p.source}, {_serial(p, year, issue)}: {pages or p.pages}."


def zh_journal(sim: KnsSimulator) -> dict[int, SimPaper]:
    return {p.idx: p for p in sim.corpus.papers if p.resource == "JOURNAL" and not p.online_first and p.language == "zh"}


def build_cases(sim: KnsSimulator) -> list[Case]:
    j = zh_journal(sim)
    twin_journal = next(p for p in sim.corpus.papers if p.resource == "JOURNAL" and not p.online_first)
    twin_thesis = next(p for p in sim.corpus.papers if p.doc_type == "硕士" and p.title == twin_journal.title)
    thesis = next(p for p in sim.corpus.papers if p.doc_type == "博士")
    conference = next(p for p in sim.corpus.papers if p.resource == "CONFERENCE")
    newspaper = next(p for p in sim.corpus.papers if p.resource == "NEWSPAPER")
    english = next(p for p in sim.corpus.papers if p.language == "en")
    translated = next(p for p in j.values() if p.title_en == TRANSLATED_TITLES[0])
    wide = j[8]
    full_width = (f"{'，'.join(wide.authors)}．{wide.title}［Ｊ］．{wide.source}，"
                  f"{wide.year}({wide.issue})：{wide.pages}．").translate(_FULL_WIDTH)
    v4, v5, v6, v7, v14 = j[24], j[25], j[32], j[33], j[34]
    d5, d6, d7, d8 = j[42], j[43], j[28], j[31]
    return [
        # verified
        Case("verified: GB/T numeric", gbt(j[3]), "verified", j[3]),
        Case("verified: full-width punctuation", full_width, "verified", wide),
        Case("verified: traditional characters", gbt(j[13], title=_TRADITIONAL.convert(j[13].title)), "verified", j[13]),
        Case("verified: 等 and en dash", gbt(v4, authors=_names(v4.authors[:3]) + ", 等", pages=v4.pages.replace("-", "–")),
             "verified", v4),
        Case("verified: APA, pinyin names",
             f"Xu, W., Yu, Y. Y., Zhao, Y., & Dong, N. H. ({v5.year}). {v5.title}. {v5.source}, {v5.volume}({v5.issue}), "
             f"{v5.pages}.", "verified", v5),
        Case("verified: 《》 line", f"{'、'.join(v6.authors)}：《{v6.title}》，《{v6.source}》{v6.year}年第{v6.issue}期。",
             "verified", v6),
        Case("verified: GB/T author-date",
             f"{_names(v7.authors[:3])}, 等, {v7.year}. {v7.title}[J]. {v7.source}, {v7.volume}({v7.issue}): {v7.pages}.",
             "verified", v7),
        Case("verified: thesis [D]", f"{thesis.authors[0]}. {thesis.title}[D]. 重庆: {thesis.source}, {thesis.year}.",
             "verified", thesis),
        Case("verified: conference [C]",
             f"{_names(conference.authors)}. {conference.title}[C]//{conference.source}. 西安: {conference.year}: "
             f"{conference.pages}.", "verified", conference),
        Case("verified: newspaper [N]", f"{newspaper.authors[0]}. {newspaper.title}[N]. {newspaper.source}, "
             f"{newspaper.date}({newspaper.edition_no}).", "verified", newspaper),
        Case("verified: English paper, Vancouver",
             f"Wang X. {english.title}. Science China Information Sciences. {english.year};({english.issue}):"
             f"{english.pages}.", "verified", english),
        Case("verified: English title of a Chinese paper",
             f"Du N. {TRANSLATED_TITLES[0]}[J]. Journal of Software Engineering, {translated.year}({translated.issue}): "
             f"{translated.pages}.", "verified", translated),
        Case("verified: shared title, author given",
             f"{twin_thesis.authors[0]}. {twin_thesis.title}[D]. 重庆: {twin_thesis.source}, {twin_thesis.year}.",
             "verified", twin_thesis),
        Case("verified: with DOI", gbt(v14)[:-1] + f". DOI: {v14.doi}.", "verified", v14),
        # one wrong fact
        Case("differs: wrong year", gbt(j[36], year=j[36].year - 2), "differs", j[36], ["year"]),
        Case("differs: wrong year", gbt(j[37], year=j[37].year - 2), "differs", j[37], ["year"]),
        Case("differs: wrong pages", gbt(j[38], pages="45-60"), "differs", j[38], ["pages"]),
        Case("differs: wrong pages", gbt(j[40], pages="17-20"), "differs", j[40], ["pages"]),
        Case("differs: wrong author order", gbt(d5, authors=_names([d5.authors[1], d5.authors[0], *d5.authors[2:]])),
             "differs", d5, ["authors"]),
        Case("differs: wrong author order", gbt(d6, authors=_names([d6.authors[1], d6.authors[0], *d6.authors[2:]])),
             "differs", d6, ["authors"]),
        Case("differs: subtitle missing", gbt(d7, title=d7.title.split("：")[0]), "differs", d7, ["title"]),
        Case("differs: subtitle missing", gbt(d8, title=d8.title.split("：")[0]), "differs", d8, ["title"]),
        Case("differs: wrong issue", gbt(j[29], issue="8"), "differs", j[29], ["issue"]),
        # not on CNKI
        Case("not_found: invented title", "王小明, 李华. 区块链赋能乡村振兴的内在逻辑与实现路径[J]. 农业经济问题, 2022, 43(5): 12-20.",
             "not_found"),
        Case("not_found: invented English title",
             "Smith J, Brown K. Quantum annealing for portfolio selection in emerging markets. J Finance. 2020;75(2):101-19.",
             "not_found"),
        Case("not_found: book not on CNKI", "张明. 合同法原理与案例精析[M]. 北京: 法律出版社, 2018.", "not_found"),
        Case("not_found: English book", "Posner R A. Economic Analysis of Law[M]. New York: Wolters Kluwer, 2014.",
             "not_found"),
        # two records share the title
        Case("ambiguous: shared title only", f"《{twin_journal.title}》", "ambiguous"),
        # no reference
        Case("unparsed: a note", "见第三章", "unparsed"),
        Case("unparsed: 同上", "同上，第45页。", "unparsed"),
    ]


class Mcp(McpSession):
    async def finished(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        view = await self.wait(await self.call(tool, arguments))
        assert view["status"] == "completed", view
        return view


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mcp]:
    data = tmp_path_factory.mktemp("references") / "data"
    async with Mcp.serving(serve_params(data, kns_server.browser_args), wait_timeout=240) as mcp:
        yield mcp


def accuracy_table(cases: list[Case], entries: list[dict[str, Any]], refs: dict[str, str]) -> tuple[str, int]:
    """The table the closing note quotes: per category, entries and how many got everything right."""
    rows: dict[str, list[int]] = {}
    wrong = 0
    for case, entry in zip(cases, entries, strict=True):
        right = entry["status"] == case.status and sorted(d["field"] for d in entry.get("differences", [])) == case.fields
        if case.paper is not None:
            right = right and refs.get(entry.get("record_ref", "")) == case.paper.filename
        row = rows.setdefault(case.category, [0, 0])
        row[0] += 1
        row[1] += right
        wrong += not right
    lines = ["| case | entries | right |", "| --- | --- | --- |"]
    lines += [f"| {name} | {count} | {right} |" for name, (count, right) in rows.items()]
    return "\n".join(lines), wrong


async def test_a_thirty_entry_list_gets_the_right_status_record_and_correction_for_every_entry(
    mcp: Mcp, kns: KnsSimulator
) -> None:
    cases = build_cases(kns)
    assert len(cases) == 30
    text = "参考文献\n" + "\n".join(f"[{i}] {case.text}" for i, case in enumerate(cases, 1))
    kns.clear_log()

    view = await mcp.finished("check_references", {"text": text})

    counts = Counter(r.endpoint for r in kns.requests)
    result = view["result"]
    entries = result["entries"]
    matched = [e["record_ref"] for e in entries if e.get("record_ref")]
    records = (await mcp.call("get_metadata", {"record_refs": matched, "local_only": True}))["result"]["records"]
    refs = {r["record_ref"]: r["filename"] for r in records}
    table, wrong = accuracy_table(cases, entries, refs)
    requests = sum(counts.values())
    print(f"\n{table}\nrequests: {dict(counts)}; {requests} for {len(cases)} entries = "
          f"{requests / len(cases):.2f} per entry; operation requests {view['requests']}")
    assert [e["index"] for e in entries] == list(range(1, 31))
    assert [(e["index"], e["status"]) for e in entries] == [(i, c.status) for i, c in enumerate(cases, 1)]
    assert [sorted(d["field"] for d in e.get("differences", [])) for e in entries] == [c.fields for c in cases]
    assert [refs.get(e.get("record_ref", "")) for e in entries] == [c.paper.filename if c.paper else None for c in cases]
    assert wrong == 0
    # What could not be confirmed is said: a newspaper's edition number (the record has no pages), and an
    # English journal name against CNKI's Chinese one.
    assert [(e["index"], e["not_compared"]) for e in entries if "not_compared" in e] == [
        (10, ["pages"]), (11, ["source"]), (12, ["source"])
    ]
    ambiguous = next(e for e in entries if e["status"] == "ambiguous")
    twins = [p.filename for p in kns.corpus.papers if p.title == ambiguous["candidates"][0]["title"]]
    assert sorted(c["document_type"] for c in ambiguous["candidates"]) == ["期刊", "硕士"] and len(twins) == 2
    assert result["summary"] == {"total": 30, "lines": 30, "verified": 14, "differs": 9, "not_found": 4, "ambiguous": 1,
                                 "unparsed": 2, "unchecked": 0}


async def test_corrected_is_what_export_citations_gives_for_the_record(mcp: Mcp, kns: KnsSimulator) -> None:
    cases = [case for case in build_cases(kns) if case.paper is not None]
    view = await mcp.finished("check_references", {"references": [case.text for case in cases], "style": "gbt7714"})
    entries = view["result"]["entries"]
    exported = await mcp.call("export_citations", {"record_refs": [e["record_ref"] for e in entries], "format": "gbt7714"})
    lines = [re.sub(r"^\[\d+\] ", "", line) for line in exported["data"]["text"].split("\n\n")]
    assert [e["corrected"] for e in entries] == lines


@pytest.mark.parametrize("style", ["gbt7714_2025", "gbt7714_author_date", "apa"])
async def test_corrected_follows_the_chosen_style(mcp: Mcp, kns: KnsSimulator, style: str) -> None:
    case = build_cases(kns)[0]
    view = await mcp.finished("check_references", {"references": [case.text], "style": style})
    entry = view["result"]["entries"][0]
    exported = await mcp.call("export_citations", {"record_refs": [entry["record_ref"]], "format": style})
    assert entry["corrected"] == re.sub(r"^\[\d+\] ", "", exported["data"]["text"])


async def test_not_found_says_it_does_not_prove_invention_and_names_what_cnki_lacks(mcp: Mcp, kns: KnsSimulator) -> None:
    books = [case.text for case in build_cases(kns) if case.category.startswith("not_found")]
    view = await mcp.finished("check_references", {"references": books})
    messages = [e["message"] for e in view["result"]["entries"]]
    assert ["不能证明" in m for m in messages] == [True, True, True, True]
    assert ["外文文献" in messages[1], "图书" in messages[2], "图书" in messages[3]] == [True, True, True]


def _wrapped_at(text: str, cut: int) -> str:
    """``text`` broken over two lines at ``cut``, the way a copy from a PDF or Word breaks it."""
    return f"{text[:cut].rstrip()}\n{text[cut:].lstrip()}"


async def test_a_pasted_list_in_every_shape_is_read_whole_and_says_how_many_entries_it_read(
    mcp: Mcp, kns: KnsSimulator
) -> None:
    cases = build_cases(kns)
    gbt_case, apa, loose, author_date, thesis, vancouver, later = (
        cases[0], cases[4], cases[5], cases[6], cases[7], cases[10], cases[2]
    )
    comma = gbt_case.text.index(", ", gbt_case.text.index("[J]")) + 1
    title = apa.paper.title
    middle = apa.text.index(title) + len(title) // 2
    # Mixed numbering, two entries wrapped (after a comma; in the middle of a Han title), a third over
    # three lines, the tail without numbers as after a copy from Word, a stray note in the middle, and a
    # last entry after a blank line.
    three = author_date.text.index("[J]")
    pasted = [
        ("参考文献", None),
        (f"[1] {_wrapped_at(gbt_case.text, comma)}", f"[1] {gbt_case.text}"),
        (f"2. {_wrapped_at(apa.text, middle)}", f"2. {apa.text}"),
        (f"3、{_wrapped_at(_wrapped_at(author_date.text, three + 4), author_date.text.index(', ') + 1)}",
         f"3、{author_date.text}"),
        (f"（4）{thesis.text}", f"（4）{thesis.text}"),
        (loose.text, loose.text),
        ("见第三章", "见第三章"),
        (vancouver.text, vancouver.text),
        ("", None),
        (later.text, later.text),
    ]
    text = "\n".join(line for line, _ in pasted)
    expected = [entry for _, entry in pasted if entry is not None]

    view = await mcp.finished("check_references", {"text": text})

    result = view["result"]
    read = [e["input"] for e in result["entries"]]
    print(f"\nentries expected {len(expected)}, read {result['summary']['total']} from {result['summary']['lines']} lines")
    assert read == expected
    assert [e["status"] for e in result["entries"]] == ["verified"] * 5 + ["unparsed"] + ["verified"] * 2
    assert (result["summary"]["total"], result["summary"]["lines"], result["summary"]["unparsed"]) == (8, 12, 1)

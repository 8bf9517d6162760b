"""Our exchange formats read back by the parsers reference managers and scripts use.

These parsers drop malformed records silently (bibtexparser puts them in failed_blocks, rispy skips a
record without ER), so every test checks record counts and each record's fields explicitly.
"""

from __future__ import annotations

import csv
import io
import json
import re

import bibtexparser
import pybtex.database
import pytest
import rispy
from bibtexparser.middlewares import LatexDecodingMiddleware, SeparateCoAuthors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_citations_oracle import CITEPROC_DIR, fixture_papers, run_citeproc

from cnki_mcp.core.model import Paper, Quality
from cnki_mcp.references import citations

SPECIAL = Paper(
    record_ref="special chars/1",
    title="题名{A}&B_测试: 100% of $x$ #1 \\ ~",
    authors=["Seán O'Brien", "Maria de Souza", "欧阳修"],
    source="Journal of {Braces} & Co.",
    year=2020,
    document_type="期刊",
    volume="3",
    issue="2",
    pages="10-20",
    doi="10.1000/x_{y}",
    url="https://example.test/a%20b?c=1&d=2",
    abstract="A & B, 50% less.\nSecond line.",
    keywords=["甲", "C#", "R&D"],
    quality=Quality(canonical_title="Journal of {Braces} & Co.", issn="1674-733X", cn="11-5847/TP"),
)
# Same record_ref twice must still give unique BibTeX keys (pybtex rejects duplicates).
TWIN = Paper(record_ref="special chars/1", title="Second record with the same ref", year=2021)
PAPERS = fixture_papers() + [SPECIAL, TWIN]

BIBTEX_SOURCE_FIELD = {
    "article": "journal",
    "inproceedings": "booktitle",
    "phdthesis": "school",
    "mastersthesis": "school",
    "book": "publisher",
    "misc": "publisher",
}


def expected_bibtex_fields(paper: Paper) -> set[str]:
    kind = citations.doc_type(paper)
    source_field = BIBTEX_SOURCE_FIELD[kind.bibtex]
    if kind.key == "newspaper":
        source_field = "howpublished"
    present = {
        "author": bool(paper.authors),
        "title": bool(paper.title),
        source_field: bool(paper.source),
        "year": paper.year > 0,
        "volume": bool(paper.volume),
        "number": bool(paper.issue),
        "pages": bool(paper.pages),
        "type": kind.key == "thesis",
        "note": kind.key == "online_first",
        "doi": bool(paper.doi),
        "issn": bool(paper.quality and paper.quality.issn),
        "url": bool(paper.url),
        "abstract": bool(paper.abstract),
        "keywords": bool(paper.keywords),
    }
    return {name for name, there in present.items() if there}


@pytest.fixture(scope="module")
def bibtex_text() -> str:
    return citations.render(PAPERS, "bibtex").text


def test_bibtexparser_reads_every_record_and_field(bibtex_text: str) -> None:
    library = bibtexparser.parse_string(bibtex_text)
    assert not library.failed_blocks
    assert len(library.entries) == len(PAPERS) == 11
    keys = [entry.key for entry in library.entries]
    assert len(set(keys)) == len(keys)
    for paper, entry in zip(PAPERS, library.entries):
        assert entry.entry_type == citations.doc_type(paper).bibtex
        assert set(entry.fields_dict) == expected_bibtex_fields(paper), paper.record_ref
    # url and doi are verbatim (as \url{} wants them), so they read back unchanged without decoding.
    special = library.entries[len(PAPERS) - 2]
    assert (special["url"], special["doi"], special["issn"]) == (SPECIAL.url, "10.1000/x_%7By%7D", "1674-733X")


def test_bibtexparser_decodes_back_to_the_original_values(bibtex_text: str) -> None:
    library = bibtexparser.parse_string(
        bibtex_text, append_middleware=[LatexDecodingMiddleware(), SeparateCoAuthors()]
    )
    assert len(library.entries) == len(PAPERS)
    special = library.entries[len(PAPERS) - 2]
    assert special["title"] == SPECIAL.title
    assert special["journal"] == SPECIAL.source
    assert special["author"] == ["O'Brien, Seán", "de Souza, Maria", "欧阳修"]
    assert special["keywords"] == "甲, C#, R&D"
    assert special["abstract"] == "A & B, 50% less. Second line."
    for paper, entry in zip(PAPERS, library.entries):
        assert entry["title"] == paper.title


def test_pybtex_reads_every_record_and_person(bibtex_text: str) -> None:
    data = pybtex.database.parse_string(bibtex_text, "bibtex")
    assert len(data.entries) == len(PAPERS)
    for paper, (key, entry) in zip(PAPERS, data.entries.items()):
        assert entry.type == citations.doc_type(paper).bibtex
        persons = entry.persons.get("author", [])
        assert len(persons) == len(paper.authors), key
        fields = {name.lower() for name in entry.fields} | ({"author"} if persons else set())
        assert fields == expected_bibtex_fields(paper), key
    carter = data.entries["sjes-2021-joi-101128"].persons["author"][0]
    assert carter.last_names == ["Carter"] and carter.first_names == ["Emily"] and carter.middle_names == ["R."]
    souza = data.entries[next(k for k in data.entries if k.startswith("special"))].persons["author"][1]
    assert souza.prelast_names == ["de"] and souza.last_names == ["Souza"]


def _ris_tags(record: str) -> list[str]:
    return [line[:2] for line in record.split("\r\n") if line]


def test_rispy_reads_every_record_and_tag() -> None:
    text = citations.render(PAPERS, "ris").text
    entries = rispy.loads(text)
    records = [r for r in text.split("\r\n\r\n") if r.strip()]
    assert len(entries) == len(records) == len(PAPERS)
    for paper, entry, record in zip(PAPERS, entries, records):
        assert "unknown_tag" not in entry, paper.record_ref
        tags = set(_ris_tags(record)) - {"ER"}
        assert set(entry) == {rispy.TAG_KEY_MAPPING[tag] for tag in tags}, paper.record_ref
        assert entry["type_of_reference"] == citations.doc_type(paper).ris
        assert entry.get("authors", []) == [" ".join(a.split()) for a in paper.authors]
        assert entry["title"] == paper.title
        assert entry.get("keywords", []) == paper.keywords
        if paper.year:
            assert entry["year"] == str(paper.year)
    special = entries[len(PAPERS) - 2]
    assert (special["start_page"], special["end_page"]) == ("10", "20")
    assert special["doi"] == SPECIAL.doi and special["urls"] == [SPECIAL.url]
    assert special["issn"] == "1674-733X"
    assert [entry.get("issn") for entry in entries[:-2]] == [None] * (len(PAPERS) - 2)


def _dump_fields(item: dict) -> dict[str, str]:
    """What tests/citeproc/fields.csl prints for an item, computed from the item itself."""
    out = {"title": item["title"], "type": item["type"]}
    if "author" in item:
        out["author"] = ";".join(a.get("literal") or f"{a['family']},{a['given']}" for a in item["author"])
    parts = item.get("issued", {}).get("date-parts", [[]])[0]
    if parts:
        out["issued"] = str(parts[0]) if len(parts) == 1 else f"{parts[1]:02d}/{parts[2]:02d}/{parts[0]}"
    plain = ("container-title", "publisher", "genre", "volume", "issue", "page", "DOI", "ISSN", "URL", "abstract", "keyword")
    out.update({key: item[key] for key in plain if key in item})
    if "page" in out:
        out["page"] = re.sub(r"(\d)-(\d)", "\\1\u2013\\2", out["page"])
    return out


def test_citeproc_reads_every_item_and_field() -> None:
    items = json.loads(citations.render(PAPERS, "csl_json").text)
    assert len(items) == len(PAPERS)
    style = (CITEPROC_DIR / "fields.csl").read_text(encoding="utf-8")
    out = run_citeproc([{"name": "fields", "style": style, "items": items}])["fields"]
    assert [e["id"] for e in out] == [item["id"] for item in items]
    for item, entry in zip(items, out):
        dumped = dict(pair.split("=", 1) for pair in entry["text"].split("|"))
        expected = _dump_fields(item)
        # citeproc prints names of zh-tagged items family-first without the separator and typesets
        # apostrophes; the parts are what matters here.
        for fields in (dumped, expected):
            if "author" in fields:
                fields["author"] = re.sub(r"[ ,]", "", fields["author"].replace("\u2019", "'"))
        assert dumped == expected, item["id"]
    assert [item.get("ISSN") for item in items][-2:] == ["1674-733X", None]


# --- any record, any format -------------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ 王利明-–'\"{}[]()\\%&_$#~^@=+,;:.!?\n\t") + ["\u2028", "é"]),
    max_size=30,
)
_PAPER = st.builds(
    Paper,
    record_ref=st.text(alphabet=st.sampled_from(list("ab1:/ _{}")), min_size=1, max_size=8),
    title=_TEXT,
    authors=st.lists(_TEXT, max_size=5),
    source=_TEXT,
    year=st.sampled_from([0, 1999, 2024]),
    publication_date=st.sampled_from(["", "2024-03-15", "2024-13-40", "bad"]),
    document_type=st.sampled_from(["期刊", "博士", "硕士", "学位论文", "会议", "报纸", "图书", "专利", ""]),
    volume=_TEXT,
    issue=st.sampled_from(["", "2", "1-2", "增刊"]),
    pages=st.sampled_from(["", "5", "5-23", "1205-1213", "e12", "S1-S9"]),
    doi=_TEXT,
    url=_TEXT,
    abstract=_TEXT,
    keywords=st.lists(_TEXT, max_size=3),
    online_first=st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PAPER, min_size=1, max_size=4))
def test_any_records_render_and_parse_back(papers: list[Paper]) -> None:
    for fmt in citations.FORMATS:
        result = citations.render(papers, fmt, "{authors}: {title} ({year})")
        assert result.count == len(papers)
    bib = bibtexparser.parse_string(citations.render(papers, "bibtex").text)
    assert not bib.failed_blocks and len(bib.entries) == len(papers)
    assert len(pybtex.database.parse_string(citations.render(papers, "bibtex").text, "bibtex").entries) == len(papers)
    ris = rispy.loads(citations.render(papers, "ris").text)
    assert len(ris) == len(papers) and all("unknown_tag" not in r for r in ris)
    rows = list(csv.reader(io.StringIO(citations.render(papers, "csv").text.lstrip("\ufeff"), newline="")))
    assert len(rows) == len(papers) + 1 and all(len(r) == 10 for r in rows)
    assert len(json.loads(citations.render(papers, "csl_json").text)) == len(papers)

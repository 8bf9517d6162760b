"""CNKI's own tagged exports, read back as their readers do: RefWorks the way CiteSpace's CNKI converter takes
CNKI's file (one record per ``RT`` block, ``A1``/``K1``/``AD`` split on ``;``), NoteExpress one record per
``{Reference Type}`` block."""

from __future__ import annotations

import re

import pytest

from cnki_mcp.core.model import Paper, Quality
from cnki_mcp.references.citations import render
from tests.test_citations import load_fixture


def read_refworks(text: str) -> list[dict[str, list[str]]]:
    """CNKI RefWorks as a converter reads it: a record starts at each ``RT`` line; a line is a two-character
    tag, one space, the value; list fields split on ``;`` with empty parts dropped."""
    records: list[dict[str, list[str]]] = []
    for line in text.split("\r\n"):
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z][A-Za-z0-9]) (.*)", line)
        assert match, f"not a tagged line: {line!r}"
        tag, value = match.groups()
        if tag == "RT":
            records.append({})
        assert records, "a field before the first RT"
        values = [v for v in value.split(";") if v] if tag in ("A1", "A3", "K1", "AD") else [value]
        records[-1].setdefault(tag, []).extend(values)
    return records


def journal(**fields: object) -> Paper:
    base: dict[str, object] = {
        "record_ref": "r1", "title": "数字乡村建设的路径", "authors": ["张三", "李四"], "source": "农业经济问题",
        "year": 2024, "publication_date": "2024-03-05", "document_type": "期刊", "volume": "45", "issue": "03",
        "pages": "12-20", "keywords": ["数字乡村", "乡村振兴"], "institutions": ["甲大学经济学院", "乙研究所"],
        "abstract": "第一行\n第二行", "doi": "10.1/x", "url": "https://kns.cnki.net/kcms2/article/abstract?v=1",
        "quality": Quality(issn="1000-6389", cn="11-1344/F"),
    }
    base.update(fields)
    return Paper(**base)  # type: ignore[arg-type]


def test_refworks_is_cnkis_form_tag_by_tag() -> None:
    text = render([journal()], "refworks").text
    assert text == "\r\n".join([
        "RT Journal Article", "SR 1", "A1 张三;李四", "AD 甲大学经济学院;乙研究所;", "T1 数字乡村建设的路径",
        "JF 农业经济问题", "YR 2024", "IS 03", "vo 45", "OP 12-20", "K1 数字乡村;乡村振兴", "AB 第一行 第二行",
        "SN 1000-6389", "CN 11-1344/F", "LA 中文;", "DS CNKI", "LK https://kns.cnki.net/kcms2/article/abstract?v=1",
        "DO 10.1/x",
    ]) + "\r\n"


def test_refworks_theses_and_newspapers_as_cnki_writes_them() -> None:
    thesis = journal(document_type="硕士", source="南京农业大学", institutions=[], volume="", issue="", pages="")
    paper = journal(document_type="报纸", source="科技日报", pages="004", publication_date="2023-09-21 08:00", year=2023)
    (t, n) = read_refworks(render([thesis, paper], "refworks").text)
    assert t["RT"] == ["Dissertation/Thesis"] and t["PB"] == ["南京农业大学"] and t["CL"] == ["硕士"] and "JF" not in t
    assert n["RT"] == ["Newspaper Article"] and n["FD"] == ["2023-09-21"] and n["OP"] == ["004"]


def test_refworks_reads_back_record_by_record_with_authors_and_keywords_split() -> None:
    papers = load_fixture() + [journal(authors=["王五；赵六", "Smith; John"], keywords=["a;b", "c"])]
    records = read_refworks(render(papers, "refworks").text)
    assert len(records) == len(papers)
    for paper, record in zip(papers, records):
        assert record["RT"][0] in ("Journal Article", "Dissertation/Thesis", "Conference Proceeding", "Newspaper Article")
        assert record["DS"] == ["CNKI"]
        assert record.get("T1", [""]) == [" ".join(paper.title.split())] or not paper.title.strip()
        assert record.get("A1", []) == [" ".join(a.replace(";", " ").replace("；", " ").split()) for a in paper.authors if a.strip()]
        assert len(record.get("K1", [])) == len([k for k in paper.keywords if k.strip()])
        if paper.year > 0:
            assert record["YR"] == [str(paper.year)]
    assert records[-1]["A1"] == ["王五 赵六", "Smith John"] and records[-1]["K1"] == ["a b", "c"]


def read_noteexpress(text: str) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    for line in text.split("\r\n"):
        if not line:
            continue
        match = re.fullmatch(r"\{([^}]+)\}: (.*)", line)
        assert match, line
        if match.group(1) == "Reference Type":
            records.append({})
        records[-1][match.group(1)] = match.group(2)
    return records


def test_noteexpress_is_cnkis_form() -> None:
    (record,) = read_noteexpress(render([journal()], "noteexpress").text)
    assert list(record) == [
        "Reference Type", "Title", "Author", "Author Address", "Journal", "Year", "Volume", "Issue", "Pages", "Keywords",
        "Abstract", "ISBN/ISSN", "Notes", "URL", "DOI", "Database Provider",
    ]
    assert record["Author"] == "张三;李四;" and record["Keywords"] == "数字乡村;乡村振兴" and record["Notes"] == "11-1344/F"
    thesis = journal(document_type="博士", source="北京大学")
    (t,) = read_noteexpress(render([thesis], "noteexpress").text)
    assert (t["Reference Type"], t["Type of Work"], t["Publisher"]) == ("Thesis", "博士", "北京大学")


@pytest.mark.parametrize("fmt", ["refworks", "noteexpress"])
def test_every_fixture_record_is_one_block(fmt: str) -> None:
    papers = load_fixture()
    text = render(papers, fmt).text
    marker = "RT " if fmt == "refworks" else "{Reference Type}: "
    assert sum(1 for line in text.split("\r\n") if line.startswith(marker)) == len(papers)


@pytest.mark.parametrize("fmt, raw_scope, scope", [
    ("refworks", None, "candidates"), ("noteexpress", None, "candidates"), ("refworks", "selected", "selected"),
    ("ris", None, "selected"),
])
def test_cnki_formats_take_a_searchs_candidates_unless_a_scope_is_given(fmt: str, raw_scope: str | None, scope: str) -> None:
    from cnki_mcp.tools import export_citations

    raw = {"search_id": "op_1", "format": fmt} | ({"scope": raw_scope} if raw_scope else {})
    args = export_citations.Args(search_id="op_1", format=fmt, scope=raw_scope or "selected")  # type: ignore[arg-type]
    export_citations.validate(args, raw)
    assert args.scope == scope

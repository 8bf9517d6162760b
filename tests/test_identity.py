"""Identity keys, same-paper and detail-binding rules, and record_ref (engine §6.1–6.4, §16.3.3)."""

from __future__ import annotations

from cnki_mcp.core.identity import (
    bibliography_key,
    detail_matches,
    fingerprint,
    go_json,
    identity_keys,
    record_ref_for,
    same_paper,
    title_index_key,
)
from cnki_mcp.core.model import Paper


def bib(title: str, author: str = "张三", **kw: object) -> Paper:
    return Paper(title=title, authors=[author], source="法学研究", year=2023, **kw)  # type: ignore[arg-type]


def test_record_ref_vectors() -> None:
    assert record_ref_for(Paper(dbname="CJFD", filename="SIM0001")) == "rec_347e451e5796a808c2da6134"
    assert record_ref_for(Paper(dbname="cjfd", filename="abc")) == "rec_e6ffa524e3f95ed688f14341"


def test_record_ref_falls_back_in_order() -> None:
    doi = Paper(doi="https://doi.org/10.1/ABC", title="t")
    assert record_ref_for(doi) == "rec_" + fingerprint("10.1/abc")[:24]
    full = bib("题名")
    assert record_ref_for(full) == "rec_" + fingerprint(bibliography_key(full))[:24]
    bare = Paper(title="题名", url="https://kns.cnki.net/kcms2/article/abstract?v=1")
    assert record_ref_for(bare) == "rec_" + fingerprint("题名\x00https://kns.cnki.net/kcms2/article/abstract?v=1")[:24]
    assert record_ref_for(Paper(title="题名", url="u", locator="l")) == "rec_" + fingerprint("题名\x00l")[:24]
    assert len(record_ref_for(Paper())) == 28


def test_go_json_encoding() -> None:
    assert go_json(["a<b>&c", 1.0, 0.8, 2, "中文", "\u2028"]) == '["a\\u003cb\\u003e\\u0026c",1,0.8,2,"中文","\\u2028"]'
    assert go_json({"k": [True, None]}) == '{"k":[true,null]}'


def test_identity_keys() -> None:
    paper = bib("题名", dbname="CJFD", filename="x1", doi="DOI:10.1/X")
    keys = identity_keys(paper)
    assert keys[:2] == ["native:CJFD:X1", "doi:10.1/x"]
    assert keys[2].startswith("bib:")
    assert identity_keys(Paper(title="只有题名")) == []
    assert title_index_key(Paper(title="A  B")) == "title:a b"


def test_titles_differing_only_by_spaces_around_dashes_are_the_same_paper() -> None:
    a, b = bib("研究——以上海为例"), bib("研究 —— 以上海为例")
    assert same_paper(a, b)
    assert detail_matches(a, b)
    other = bib("研究 —— 以上海为例", author="李四")
    assert not same_paper(a, other)
    assert not detail_matches(a, other)


def test_title_alone_never_merges() -> None:
    assert not same_paper(Paper(title="同名"), Paper(title="同名"))
    assert not same_paper(bib("同名", filename="A", dbname="CJFD"), bib("同名", author="李四", filename="B", dbname="CJFD"))


def test_conflicting_identifiers_never_merge() -> None:
    assert not same_paper(bib("t", doi="10.1/a"), bib("t", doi="10.1/b"))
    assert same_paper(Paper(doi="https://doi.org/10.1/A"), Paper(doi="10.1/a"))
    assert not same_paper(bib("t", dbcode="CJFQ"), bib("t", dbcode="CDFD"))
    assert same_paper(bib("t", dbcode="CJFQ"), bib("t", dbcode="cjfq"))
    assert not detail_matches(bib("t", doi="10.1/a"), bib("t", doi="10.1/b"))


def test_detail_match_checks_only_what_both_sides_have() -> None:
    requested = Paper(title="题名", authors=["张三"], source="法学研究（双月刊）")
    assert detail_matches(requested, Paper(title="题名"))
    assert detail_matches(requested, Paper(title="题名", authors=["张三", "李四"], source="法学研究(双月刊)."))
    assert not detail_matches(requested, Paper(title="题名", source="中国法学"))
    assert not detail_matches(requested, Paper(title="另一个题名"))

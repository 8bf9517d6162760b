"""Ranking, selection, exclusions, detail pool and feedback keywords (engine §7.1, §8, §9, §16.3.4)."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cnki_mcp.core.model import PARSER_VERSION, Evidence, Hit, Paper, Quality
from cnki_mcp.core.text import is_han
from cnki_mcp.research.query import feedback_channels
from cnki_mcp.research.rank import (
    EXCLUDED_IRRELEVANT,
    EXCLUDED_THRESHOLD,
    RankedPaper,
    choose,
    detail_pool,
    discovery_order,
    evidence_for,
    exclusions,
    f1,
    feedback_keywords,
    pool_size,
    quality_evidence,
    rank,
    reciprocal_rank,
    resource_type_score,
    score,
    search_entries,
    select,
    tier_score,
    token_set,
)

YEAR = 2026
CONCEPTS = [["自动驾驶"], ["产品责任"]]


def journal(*tiers: str, composite: float | None = None, aggregate: float | None = None, **kw: str) -> Quality:
    return Quality(
        tiers=list(tiers),
        composite_impact=composite,
        aggregate_impact=aggregate,
        state=kw.get("state", "present"),
        parser=kw.get("parser", PARSER_VERSION),
    )


def related(ref: str = "rec_related") -> Paper:
    return Paper(
        record_ref=ref,
        title="自动驾驶产品责任",
        abstract="自动驾驶产品责任",
        keywords=["自动驾驶", "产品责任", "风险分配"],
        quality=journal("CSSCI", composite=3.0),
        cited=15,
        year=2025,
        document_type="期刊",
    )


def irrelevant() -> Paper:
    return Paper(
        record_ref="rec_irrelevant",
        title="材料制备技术",
        abstract="材料制备研究",
        keywords=["材料"],
        quality=journal("SCI", composite=3.0),
        year=2020,
        document_type="期刊",
    )


HITS = {
    "rec_related": [Hit("su", 1, 0), Hit("ti", 1, 0), Hit("ky", 2, 0)],
    "rec_irrelevant": [Hit("su", 1, 0)],
}


def sample_ranking() -> list[RankedPaper]:
    return rank([irrelevant(), related()], CONCEPTS, HITS, YEAR)


# --- tokens ---------------------------------------------------------------------------------------


def test_token_sets() -> None:
    assert token_set("自动驾驶 产品责任") == {"自动", "动驾", "驾驶", "产品", "品责", "责任"}
    assert token_set("C++ 内存模型 Wi-Fi 8 IEEE P802.11bn") == {
        "c", "内存", "存模", "模型", "wi-fi", "8", "ieee", "p802.11bn",
    }  # fmt: skip
    assert token_set("单 字 a") == {"a"}
    assert token_set("Deep_Learning TCP/IP v1.2.") == {"deep_learning", "tcp/ip", "v1.2"}
    assert token_set("〇〇七") == {"〇〇", "〇七"}
    assert token_set("") == frozenset()


def plain_token_set(text: str) -> set[str]:
    """The definition of engine §9.1, written the slow and obvious way."""
    import re

    text = text.lower()
    tokens = set(re.findall(r"[a-z0-9]+(?:[+._/-][a-z0-9]+)*", text))
    tokens |= {a + b for a, b in zip(text, text[1:]) if is_han(a) and is_han(b)}
    return tokens


@given(st.text(alphabet=st.sampled_from("自动驾驶产品责任𠀀𠀁〇々 ab1-.+_/C，。\n"), max_size=40))
def test_token_set_matches_its_definition(text: str) -> None:
    assert token_set(text) == plain_token_set(text)


def test_dice_overlap() -> None:
    q = token_set("自动驾驶 产品责任")
    assert f1(q, token_set("自动驾驶产品责任")) == pytest.approx(12 / 13)
    assert f1(q, frozenset()) == 0.0
    assert f1(frozenset(), q) == 0.0
    assert f1(q, q) == 1.0


# --- the worked vectors ---------------------------------------------------------------------------


def test_related_vector() -> None:
    evidence = evidence_for(related(), CONCEPTS, HITS["rec_related"], YEAR)
    assert evidence.title_match == pytest.approx(12 / 13, abs=1e-4)
    assert evidence.abstract_match == pytest.approx(12 / 13, abs=1e-4)
    assert evidence.keyword_match == pytest.approx(0.8, abs=1e-4)
    assert evidence.rrf == pytest.approx(0.048916, abs=1e-4)
    assert evidence.concept_coverage == 1.0
    assert evidence.relevance == pytest.approx(0.93349, abs=1e-4)
    assert evidence.source_tier == 0.96
    assert evidence.impact == pytest.approx(0.77687, abs=1e-4)
    assert evidence.annual_citations == pytest.approx(0.91792, abs=1e-4)
    assert evidence.resource_type == 0.55
    assert evidence.quality == pytest.approx(0.86480, abs=1e-4)
    assert evidence.quality_evidence_present
    assert score(evidence) == pytest.approx(1.02442, abs=1e-4)


def test_irrelevant_vector() -> None:
    evidence = evidence_for(irrelevant(), CONCEPTS, HITS["rec_irrelevant"], YEAR)
    assert evidence.relevance == pytest.approx(0.08236, abs=1e-4)
    assert evidence.quality == pytest.approx(0.699, abs=1e-3)
    assert evidence.concept_coverage == 0.0


def test_ranking_puts_the_eligible_paper_first() -> None:
    first, second = sample_ranking()
    assert (first.record_ref, first.eligible) == ("rec_related", True)
    assert (second.record_ref, second.eligible) == ("rec_irrelevant", False)
    assert first.evidence.source_tier == 0.96
    assert first.evidence.annual_citations > 0 and first.evidence.impact > 0
    assert first.score == pytest.approx(1.02442, abs=1e-4)


def test_select_with_default_limit_returns_one() -> None:
    assert [r.record_ref for r in select(sample_ranking(), 0)] == ["rec_related"]


# --- relevance parts ------------------------------------------------------------------------------


def test_reciprocal_rank_counts_each_channel_once() -> None:
    total, channels = reciprocal_rank([Hit("q1", 3, 1), Hit("q1", 1, 1), Hit("q2", 0, 1), Hit("feedback1", 1, 0.8)])
    assert total == pytest.approx(1 / 63 + 0.8 / 61)
    assert channels == 2
    assert reciprocal_rank([]) == (0.0, 0)


def test_concept_coverage_is_case_insensitive_substring() -> None:
    paper = Paper(record_ref="r", title="Wi-Fi 8 的多链路调度", keywords=["MLO"])
    assert evidence_for(paper, [["wi-fi 8"], ["mlo"]], year=YEAR).concept_coverage == 1.0
    assert evidence_for(paper, [["WiFi8"], ["调度"]], year=YEAR).concept_coverage == 0.5
    assert evidence_for(paper, [["WiFi8", "Wi-Fi 8"], ["调度"]], year=YEAR).concept_coverage == 1.0
    assert evidence_for(paper, [], year=YEAR).concept_coverage == 0.0


def test_eligibility_needs_relevance_and_half_the_concepts() -> None:
    title_only = Paper(record_ref="r", title="自动驾驶")
    hits = [Hit("q1", 1, 1), Hit("q2", 1, 1), Hit("q3", 1, 1)]
    (one,) = rank([title_only], CONCEPTS, {"r": hits}, YEAR)
    assert one.evidence.concept_coverage == 0.5
    assert one.evidence.relevance >= 0.25
    assert one.eligible
    (none,) = rank([title_only], [["产品责任"], ["风险"], ["算法"]], {"r": hits}, YEAR)
    assert none.evidence.concept_coverage == 0.0
    assert not none.eligible


# --- quality --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "tier"),
    [
        ("CSSCI", 0.96),
        ("CSSCI扩展版", 0.96),
        ("cssci来源期刊", 0.96),
        ("SSCI", 1.0),
        ("SCI", 1.0),
        ("sci-e", 1.0),
        ("A&HCI", 1.0),
        ("SCI来源期刊", 0.0),
        ("北大核心", 0.94),
        ("CSCD", 0.94),
        ("CSCD扩展库", 0.94),
        ("EI", 0.90),
        ("EI来源期刊", 0.90),
        ("EI Compendex", 0.90),
        ("EISEVIER", 0.0),
        ("AMI核心", 0.88),
        ("AMI综合评价核心", 0.88),
        ("AMI顶级", 0.92),
        ("AMI权威", 0.90),
        ("AMI扩展", 0.0),
        ("AMI入库", 0.0),
        ("WJCI", 0.0),
        ("Scopus", 0.90),
        ("卓越期刊", 0.94),
        ("CAS", 0.0),
        ("JST", 0.0),
        ("", 0.0),
    ],
)
def test_tier_scores(tag: str, tier: float) -> None:
    assert tier_score(tag) == tier


def test_tier_is_the_best_tag() -> None:
    evidence = quality_evidence(Paper(quality=journal("AMI核心", "北大核心", "CSSCI")), YEAR)
    assert evidence.source_tier == 0.96
    assert evidence.quality_evidence_present


@pytest.mark.parametrize("quality", [journal("SCI", composite=5.0, state="unknown"), journal("SCI", composite=5.0, parser="4")])
def test_quality_needs_present_state_and_current_parser(quality: Quality) -> None:
    evidence = quality_evidence(Paper(quality=quality, document_type="期刊"), YEAR)
    assert (evidence.source_tier, evidence.impact, evidence.quality_evidence_present) == (0.0, 0.0, False)
    assert evidence.quality == pytest.approx(0.055)


def test_impact_falls_back_to_aggregate_and_clamps_negative() -> None:
    assert quality_evidence(Paper(quality=journal(aggregate=2.0)), YEAR).impact == pytest.approx(1 - math.exp(-1))
    assert quality_evidence(Paper(quality=journal(composite=0.0, aggregate=2.0)), YEAR).impact == 0.0
    assert quality_evidence(Paper(quality=journal(composite=-3.0)), YEAR).impact == 0.0
    evidence = quality_evidence(Paper(quality=journal()), YEAR)
    assert evidence.impact == 0.0 and evidence.quality_evidence_present


def test_annual_citations() -> None:
    this_year = quality_evidence(Paper(cited=6, year=YEAR), YEAR)
    assert this_year.annual_citations == pytest.approx(1 - math.exp(-2))
    assert this_year.quality_evidence_present
    old = quality_evidence(Paper(cited=30, year=2017), YEAR)
    assert old.annual_citations == pytest.approx(1 - math.exp(-30 / 10 / 3))
    zero = quality_evidence(Paper(cited=0, year=2020), YEAR)
    assert zero.annual_citations == 0.0 and zero.quality_evidence_present
    for paper in (Paper(cited=5, year=0), Paper(cited=5, year=YEAR + 1), Paper(year=2020)):
        evidence = quality_evidence(paper, YEAR)
        assert evidence.annual_citations == 0.0 and not evidence.quality_evidence_present


@pytest.mark.parametrize(
    ("document_type", "value"),
    [("博士", 0.72), ("硕士", 0.46), ("本科", 0.10), ("期刊", 0.55), ("会议", 0.52), ("报纸", 0.14),
     ("国际会议", 0.52), ("专利", 0.0), ("", 0.0)],
)  # fmt: skip
def test_resource_types(document_type: str, value: float) -> None:
    assert resource_type_score(document_type) == value


def test_score_formula_and_range() -> None:
    assert score(Evidence(relevance=1.0, quality=1.0)) == pytest.approx(1.2)
    assert score(Evidence(relevance=0.5, quality=0.0)) == pytest.approx(0.175)
    assert score(Evidence()) == 0.0


# --- order and selection --------------------------------------------------------------------------


def ranked(ref: str, score_: float, *, eligible: bool = True, relevance: float = 0.6, quality: float = 0.5,
           coverage: float = 1.0, present: bool = True) -> RankedPaper:  # fmt: skip
    evidence = Evidence(relevance=relevance, quality=quality, concept_coverage=coverage, quality_evidence_present=present)
    return RankedPaper(Paper(record_ref=ref), score_, eligible, evidence)


def test_ties_break_by_record_ref() -> None:
    papers = [Paper(record_ref=ref, title="自动驾驶产品责任") for ref in ("rec_c", "rec_a", "rec_b")]
    assert [r.record_ref for r in rank(papers, CONCEPTS, {}, YEAR)] == ["rec_a", "rec_b", "rec_c"]


def test_eligible_papers_rank_before_higher_scores() -> None:
    strong_but_off_topic = Paper(record_ref="rec_0", title="材料", quality=journal("SCI", composite=9.0), cited=900, year=2025)
    on_topic = Paper(record_ref="rec_1", title="自动驾驶产品责任")
    first, second = rank([strong_but_off_topic, on_topic], CONCEPTS, {}, YEAR)
    assert first.record_ref == "rec_1" and second.score > first.score


def test_selection_floor_is_relative_to_the_top_score() -> None:
    items = [ranked("a", 1.0), ranked("b", 0.55), ranked("c", 0.549)]
    assert [r.record_ref for r in select(items)] == ["a", "b"]
    low = [ranked("a", 0.3), ranked("b", 0.24), ranked("c", 0.2399)]
    assert [r.record_ref for r in select(low)] == ["a", "b"]


@pytest.mark.parametrize(
    ("kwargs", "kept"),
    [
        ({"relevance": 0.35, "coverage": 1.0, "quality": 0.0}, True),
        ({"relevance": 0.35, "coverage": 0.5, "quality": 0.0}, False),
        ({"relevance": 0.30, "coverage": 0.5, "quality": 0.45}, True),
        ({"relevance": 0.35, "coverage": 0.5, "quality": 0.25}, True),
        ({"relevance": 0.34, "coverage": 0.5, "quality": 0.44}, False),
        ({"relevance": 0.55, "coverage": 0.5, "quality": 0.0, "present": False}, True),
        ({"relevance": 0.55, "coverage": 0.5, "quality": 0.0, "present": True}, False),
        ({"relevance": 0.54, "coverage": 0.5, "quality": 0.0, "present": False}, False),
        ({"relevance": 0.9, "coverage": 1.0, "quality": 0.9, "eligible": False}, False),
    ],
)
def test_selection_rules(kwargs: dict, kept: bool) -> None:
    items = [ranked("top", 0.5), ranked("x", 0.5, **kwargs)]
    assert ("x" in [r.record_ref for r in select(items)]) is kept


def test_selection_stops_at_the_limit() -> None:
    items = [ranked(f"r{i:03d}", 0.9) for i in range(150)]
    assert len(select(items)) == 100
    assert len(select(items, 0)) == 50
    assert len(select(items, 7)) == 7
    assert select([]) == []


def test_choose_per_case() -> None:
    items = [ranked(f"e{i:03d}", 0.9) for i in range(90)] + [ranked(f"n{i:03d}", 0.1, eligible=False) for i in range(30)]
    normal = choose(items, method="lexical", metadata="ranked")
    assert len(normal) == 90 and all(r.eligible for r in normal)
    basic = choose(items, method="lexical", metadata="basic")
    assert len(basic) == 100 and sum(not r.eligible for r in basic) == 10
    structured = discovery_order([Paper(record_ref=f"s{i}") for i in range(130)])
    assert all(r.eligible and r.score == 0.0 and r.evidence == Evidence() for r in structured)
    assert [r.record_ref for r in choose(structured, method="structured", metadata="all")] == [f"s{i}" for i in range(100)]


def test_exclusions_and_entries() -> None:
    items = [ranked("a", 1.0), ranked("b", 0.2), ranked("c", 0.1, eligible=False), ranked("d", 0.1, eligible=False)]
    chosen = select(items)
    assert [r.record_ref for r in chosen] == ["a"]
    assert exclusions(items, chosen) == {EXCLUDED_THRESHOLD: 1, EXCLUDED_IRRELEVANT: 2}
    assert exclusions(items[:1], chosen) == {}
    entries = search_entries(items, chosen)
    assert [(e.record_ref, e.selected, e.eligible) for e in entries] == [
        ("a", True, True), ("b", False, True), ("c", False, False), ("d", False, False),
    ]  # fmt: skip
    assert set(msgspec.to_builtins(entries[0])["evidence"]) == {
        "relevance", "quality", "title_match", "abstract_match", "keyword_match", "rrf", "concept_coverage",
        "source_tier", "impact", "annual_citations", "resource_type", "quality_evidence_present", "graph_links",
    }  # fmt: skip


# --- detail pool ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "size"),
    [(0, 0), (12, 12), (30, 30), (31, 31), (40, 40), (60, 40), (100, 40), (101, 60), (160, 60), (300, 60), (301, 80), (1000, 80)],
)
def test_pool_size(n: int, size: int) -> None:
    assert pool_size(n) == size


def test_detail_pool() -> None:
    refs = [f"r{i:03d}" for i in range(120)]
    preliminary = [ranked(ref, 1 - i / 1000) for i, ref in enumerate(reversed(refs))]
    assert detail_pool(refs, "basic", preliminary) == []
    assert detail_pool(refs, "all") == refs
    assert detail_pool(refs, "ranked", preliminary) == list(reversed(refs))[:60]


# --- feedback keywords ----------------------------------------------------------------------------


def test_feedback_vector() -> None:
    papers = [related("rec_a"), related("rec_b")]
    keywords = feedback_keywords(rank(papers, CONCEPTS, {}, YEAR), CONCEPTS)
    assert keywords == ["风险分配"]
    (channel,) = feedback_channels(CONCEPTS, keywords)
    text = json.dumps(msgspec.to_builtins(channel), ensure_ascii=False)
    assert "风险分配" in text and "产品责任" in text


def with_keywords(ref: str, *keywords: str, eligible: bool = True) -> RankedPaper:
    return RankedPaper(Paper(record_ref=ref, keywords=list(keywords)), 0.5, eligible)


def test_feedback_counts_each_keyword_once_per_paper_and_orders_by_frequency_then_key() -> None:
    items = [
        with_keywords("1", "算法责任", "算法责任", "B类", "a类"),
        with_keywords("2", "算法责任", "b类", "A类"),
        with_keywords("3", "算法责任", "B类", "A类", "Zeta"),
        with_keywords("4", "zeta"),
    ]
    # 算法责任, a类 and b类 each appear in 3 papers: the tie is broken by the normalized key.
    assert feedback_keywords(items, CONCEPTS) == ["A类", "B类"]
    assert feedback_keywords(items[:2] + [with_keywords("3", "算法责任")], CONCEPTS) == ["算法责任", "A类"]


def test_feedback_skips_ineligible_short_long_known_and_rare_keywords() -> None:
    items = [
        with_keywords("1", "X", "长" * 31, "自动驾驶", " 产品责任 ", "仅一次", "共享词"),
        with_keywords("2", "X", "长" * 31, "自动驾驶", "产品责任", "共享词"),
        with_keywords("3", "独有", eligible=False),
        with_keywords("4", "独有", eligible=False),
        with_keywords("5"),
    ]
    assert feedback_keywords(items, CONCEPTS) == ["共享词"]
    assert feedback_keywords(items, []) == []


def test_feedback_looks_only_at_the_top_ten_positions() -> None:
    items = [with_keywords(str(i), eligible=False) for i in range(9)] + [
        with_keywords("9", "共享词"),
        with_keywords("10", "共享词"),
    ]
    assert feedback_keywords(items, CONCEPTS) == []
    assert feedback_keywords(items[1:], CONCEPTS) == ["共享词"]


def test_feedback_keeps_the_last_spelling_seen() -> None:
    items = [with_keywords("1", "Deep Learning"), with_keywords("2", "deep  learning")]
    assert feedback_keywords(items, CONCEPTS) == ["deep  learning"]

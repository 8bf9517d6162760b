"""Relevance, source quality, total score, eligibility and the selection of a search's results.

The formulas are the reference server's (docs/architecture.md, "Ranking"): text match is a Dice overlap of token sets made of
Chinese character pairs and English words; quality mixes the journal's inclusion tier, its impact
factor, annual citations and the document type. Everything is pure and deterministic: ties are
broken by ``record_ref``.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime

import msgspec

from cnki_mcp.core.model import PARSER_VERSION, SITE_ORDER_METHODS, Evidence, Hit, Paper, SearchEntry
from cnki_mcp.core.text import HAN_RANGES, normalize

SELECTION_CAP = 100
DEFAULT_LIMIT = 50
RRF_K = 60
ELIGIBLE_RELEVANCE = 0.25
ELIGIBLE_COVERAGE = 0.5
# The citation graph (search options.expand): a candidate linked to this many selected papers (it cites them or
# they cite it) has full graph evidence, and is eligible without covering the concepts.
GRAPH_LINKS_FULL = 2
GRAPH_WEIGHT = 0.36
FEEDBACK_TOP = 10
FEEDBACK_MAX = 2
FEEDBACK_MIN_PAPERS = 2

EXCLUDED_IRRELEVANT = "insufficient_relevance_evidence"
EXCLUDED_THRESHOLD = "ranking_or_quality_threshold"

# --- tokens ---------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+(?:[+._/-][a-z0-9]+)*")
_HAN_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in HAN_RANGES)
_HAN_RUN = re.compile(f"[{_HAN_CLASS}]{{2,}}")


class Tokens:
    """A token set split in two: English words, and Han pairs packed as 64-bit integers.

    Ranking thousands of abstracts builds hundreds of thousands of pairs; reading them as integers
    straight from the UTF-32 encoding is several times faster than slicing two-character strings.
    """

    __slots__ = ("pairs", "words")

    def __init__(self, text: str) -> None:
        text = text.lower()
        self.words = frozenset(_WORD.findall(text))
        self.pairs: set[int] = set()
        for run in _HAN_RUN.findall(text):
            raw = memoryview(run.encode("utf-32-le"))
            # Each pair is an 8-byte window at a 4-byte step: the even windows, then the odd ones.
            self.pairs.update(raw[: len(raw) // 8 * 8].cast("Q"))
            self.pairs.update(raw[4 : 4 + (len(raw) - 4) // 8 * 8].cast("Q"))

    def __len__(self) -> int:
        return len(self.words) + len(self.pairs)

    def dice(self, other: Tokens) -> float:
        """``f1`` of the two token sets."""
        return _dice(len(self.words & other.words) + len(self.pairs & other.pairs), len(self), len(other))

    def strings(self) -> frozenset[str]:
        pairs = (pair.to_bytes(8, sys.byteorder).decode("utf-32-le") for pair in self.pairs)
        return self.words | frozenset(pairs)


def _dice(common: int, size_a: int, size_b: int) -> float:
    return 0.0 if not size_a or not size_b else 2 * common / (size_a + size_b)


def token_set(text: str) -> frozenset[str]:
    """English words (``wi-fi`` and ``p802.11bn`` stay whole) and every pair of adjacent Han characters."""
    return Tokens(text).strings()


def f1(query: AbstractSet[str], document: AbstractSet[str]) -> float:
    """Dice overlap 2·|Q∩D| / (|Q|+|D|); 0 when either side is empty."""
    return _dice(len(query & document), len(query), len(document))


# --- quality --------------------------------------------------------------------------------------

_EXACT_TOP = frozenset({"SSCI", "SCI", "SCI-E", "A&HCI"})
# AMI ranks its journals 顶级 > 权威 > 核心; the reference scored only 核心, so the two higher
# levels are placed just above it (still below 北大核心/CSCD, the lists the seed ranks higher).
_AMI_LEVELS = (("顶级", 0.92), ("权威", 0.90), ("核心", 0.88))
# Tags of 2026 journal pages the reference does not score, each on the tier of the list it is most like:
# Scopus is a selective international index as EI is (0.90); 卓越期刊 (中国科技期刊卓越行动计划) are picked from
# China's leading journals, the ones 北大核心/CSCD list (0.94). CAS and JST abstract journals broadly, so, as
# WJCI, they say little of a journal's standing: no tier.
_LIKE_CORE = "卓越期刊"
_LIKE_EI = "SCOPUS"


def _is_ei(tag: str) -> bool:
    # "EI" or "EI来源期刊", never a longer ASCII word that merely starts with EI.
    following = tag[2:3]
    return tag.startswith("EI") and not (following.isascii() and following.isalnum())


def tier_score(tag: str) -> float:
    """The inclusion tier of one journal tag (SCI 1.0, CSSCI 0.96, 北大核心/CSCD/卓越期刊 0.94, EI/Scopus 0.90,
    AMI …; CAS, JST and WJCI none)."""
    tag = tag.strip().upper()
    if "CSSCI" in tag:
        return 0.96
    if tag in _EXACT_TOP:
        return 1.0
    if "北大核心" in tag or "CSCD" in tag or _LIKE_CORE in tag:
        return 0.94
    if _is_ei(tag) or tag == _LIKE_EI:
        return 0.90
    if "AMI" in tag:
        for level, score in _AMI_LEVELS:
            if level in tag:
                return score
    return 0.0


_RESOURCE_TYPES = (("博士", 0.72), ("硕士", 0.46), ("本科", 0.10), ("期刊", 0.55), ("会议", 0.52), ("报纸", 0.14))


def resource_type_score(document_type: str) -> float:
    for marker, score in _RESOURCE_TYPES:
        if marker in document_type:
            return score
    return 0.0


def current_year() -> int:
    return datetime.now(UTC).year


def quality_evidence(paper: Paper, year: int | None = None) -> Evidence:
    """Source-quality evidence of one paper: tier, impact, annual citations, resource type and the mix."""
    year = current_year() if year is None else year
    evidence = Evidence()
    quality = paper.quality
    if quality is not None and quality.state == "present" and quality.parser == PARSER_VERSION:
        evidence.quality_evidence_present = True
        evidence.source_tier = max((tier_score(tag) for tag in quality.tiers), default=0.0)
        metric = quality.composite_impact if quality.composite_impact is not None else quality.aggregate_impact
        if metric is not None:
            evidence.impact = 1 - math.exp(-max(0.0, metric) / 2)
    if paper.cited is not None and 0 < paper.year <= year:
        evidence.quality_evidence_present = True
        age = max(1, year - paper.year + 1)
        evidence.annual_citations = 1 - math.exp(-max(0, paper.cited) / age / 3)
    evidence.resource_type = resource_type_score(paper.document_type)
    evidence.quality = (
        0.45 * evidence.source_tier
        + 0.25 * evidence.impact
        + 0.20 * evidence.annual_citations
        + 0.10 * evidence.resource_type
    )
    return evidence


# --- relevance ------------------------------------------------------------------------------------


class Concepts:
    """The plan's concept groups prepared once for ranking many papers."""

    __slots__ = ("groups", "tokens")

    def __init__(self, groups: Sequence[Sequence[str]]) -> None:
        self.groups = [[normalize(term) for term in group] for group in groups]
        self.tokens = Tokens(" ".join(term for group in groups for term in group))


def reciprocal_rank(hits: Iterable[Hit]) -> tuple[float, int]:
    """Σ weight/(60+position) over the first hit of each channel, and the number of channels counted."""
    total = 0.0
    channels: set[str] = set()
    for hit in hits:
        if hit.position <= 0 or hit.channel in channels:
            continue
        channels.add(hit.channel)
        total += (hit.weight or 1.0) / (RRF_K + hit.position)
    return total, len(channels)


def evidence_for(
    paper: Paper,
    concepts: Concepts | Sequence[Sequence[str]],
    hits: Iterable[Hit] = (),
    year: int | None = None,
    links: int = 0,
) -> Evidence:
    """The full evidence of one paper: relevance (text match, rank fusion, concept coverage, links to the
    selected papers in the citation graph) and quality."""
    if not isinstance(concepts, Concepts):
        concepts = Concepts(concepts)
    evidence = quality_evidence(paper, year)
    keywords = " ".join(paper.keywords)
    evidence.title_match = concepts.tokens.dice(Tokens(paper.title))
    evidence.abstract_match = concepts.tokens.dice(Tokens(paper.abstract))
    evidence.keyword_match = concepts.tokens.dice(Tokens(keywords))
    if concepts.groups:
        text = normalize(paper.title + " " + keywords + " " + paper.abstract)
        matched = sum(1 for group in concepts.groups if any(term in text for term in group))
        evidence.concept_coverage = matched / len(concepts.groups)
    evidence.rrf, channels_hit = reciprocal_rank(hits)
    evidence.relevance = (
        0.32 * evidence.title_match
        + 0.28 * evidence.abstract_match
        + 0.12 * evidence.keyword_match
        + 0.20 * min(20 * evidence.rrf, 1.0)
        + 0.08 * min(channels_hit / 3, 1.0)
        + 0.12 * evidence.concept_coverage
    ) / 1.12
    if links:
        evidence.graph_links = links
        evidence.relevance = min(1.0, evidence.relevance + GRAPH_WEIGHT * min(links / GRAPH_LINKS_FULL, 1.0) / 1.12)
    return evidence


def score(evidence: Evidence) -> float:
    """Total score in [0, 1.2]: relevance scaled by quality, plus a quality bonus."""
    return evidence.relevance * (0.35 + 0.65 * evidence.quality) + 0.20 * evidence.quality


def is_eligible(evidence: Evidence) -> bool:
    return evidence.relevance >= ELIGIBLE_RELEVANCE and (
        evidence.concept_coverage >= ELIGIBLE_COVERAGE or evidence.graph_links >= GRAPH_LINKS_FULL
    )


class RankedPaper(msgspec.Struct):
    paper: Paper
    score: float = 0.0
    eligible: bool = False
    evidence: Evidence = msgspec.field(default_factory=Evidence)

    @property
    def record_ref(self) -> str:
        return self.paper.record_ref


def rank(
    papers: Iterable[Paper],
    concepts: Sequence[Sequence[str]],
    hits: Mapping[str, Sequence[Hit]],
    year: int | None = None,
    links: Mapping[str, int] | None = None,
) -> list[RankedPaper]:
    """Every paper scored; eligible first, then score descending, then record_ref ascending.

    ``links``: per record, how many selected papers it is linked to in the citation graph (expand).
    """
    year = current_year() if year is None else year
    prepared = Concepts(concepts)
    links = links or {}
    ranked = []
    for paper in papers:
        evidence = evidence_for(paper, prepared, hits.get(paper.record_ref, ()), year, links.get(paper.record_ref, 0))
        ranked.append(RankedPaper(paper, score(evidence), is_eligible(evidence), evidence))
    ranked.sort(key=lambda r: (not r.eligible, -r.score, r.record_ref))
    return ranked


def discovery_order(papers: Iterable[Paper]) -> list[RankedPaper]:
    """Structured and expert searches keep CNKI's own order: every candidate eligible, score 0, no evidence."""
    return [RankedPaper(paper, 0.0, True) for paper in papers]


# --- selection ------------------------------------------------------------------------------------


def _strong_enough(evidence: Evidence) -> bool:
    relevance, quality = evidence.relevance, evidence.quality
    return (
        (relevance >= 0.35 and evidence.concept_coverage == 1)
        or quality >= 0.45
        or (quality >= 0.25 and relevance >= 0.35)
        # Unknown quality is not poor quality.
        or (not evidence.quality_evidence_present and relevance >= 0.55)
    )


def select(ranked: Sequence[RankedPaper], limit: int = SELECTION_CAP) -> list[RankedPaper]:
    """Eligible papers scoring at least max(0.24, 0.55 × the top score) that meet one evidence rule."""
    if not ranked:
        return []
    if limit <= 0:
        limit = DEFAULT_LIMIT
    floor = max(0.24, 0.55 * ranked[0].score)
    selected = []
    for item in ranked:
        if item.eligible and item.score >= floor and _strong_enough(item.evidence):
            selected.append(item)
            if len(selected) >= limit:
                break
    return selected


def choose(ranked: Sequence[RankedPaper], *, method: str, metadata: str) -> list[RankedPaper]:
    """The selection rule of a search: structured, expert and basic take the first 100, others ``select``."""
    if method in SITE_ORDER_METHODS or metadata == "basic":
        return list(ranked[:SELECTION_CAP])
    return select(ranked, SELECTION_CAP)


def exclusions(ranked: Sequence[RankedPaper], selected: Sequence[RankedPaper]) -> dict[str, int]:
    """Why each unselected candidate was left out; empty when every candidate was selected."""
    chosen = {item.record_ref for item in selected}
    counts: dict[str, int] = {}
    for item in ranked:
        if item.record_ref in chosen:
            continue
        reason = EXCLUDED_THRESHOLD if item.eligible else EXCLUDED_IRRELEVANT
        counts[reason] = counts.get(reason, 0) + 1
    return counts


def search_entries(ranked: Sequence[RankedPaper], selected: Sequence[RankedPaper]) -> list[SearchEntry]:
    """The stored search record's entries, in ranked order."""
    chosen = {item.record_ref for item in selected}
    return [
        SearchEntry(
            record_ref=item.record_ref,
            score=item.score,
            eligible=item.eligible,
            selected=item.record_ref in chosen,
            evidence=item.evidence,
        )
        for item in ranked
    ]


# --- detail pool and feedback ---------------------------------------------------------------------


def pool_size(n: int) -> int:
    """How many top-ranked candidates get detail pages: all up to 30, then 40, 60, at most 80."""
    if n <= 30:
        return max(0, n)
    if n <= 100:
        return min(n, 40)
    if n <= 300:
        return 60
    return 80


def detail_pool(refs: Sequence[str], metadata: str, ranked: Sequence[RankedPaper] = ()) -> list[str]:
    """The refs to enrich: none for ``basic``, all for ``all``, else the top of the preliminary ranking."""
    if metadata == "basic":
        return []
    if metadata == "all":
        return list(refs)
    return [item.record_ref for item in ranked[: pool_size(len(refs))]]


def feedback_keywords(ranked: Sequence[RankedPaper], concepts: Sequence[Sequence[str]]) -> list[str]:
    """Up to 2 keywords shared by ≥2 eligible papers among the top 10 that the plan does not already hold."""
    if not concepts:
        return []
    original = {normalize(term) for group in concepts for term in group}
    counts: dict[str, int] = {}
    spelling: dict[str, str] = {}
    for item in ranked[:FEEDBACK_TOP]:
        if not item.eligible or not item.paper.keywords:
            continue
        seen: set[str] = set()
        for keyword in item.paper.keywords:
            key = normalize(keyword)
            if not 2 <= len(key) <= 30 or key in original or key in seen:
                continue
            seen.add(key)
            counts[key] = counts.get(key, 0) + 1
            spelling[key] = keyword
    shared = sorted((key for key, n in counts.items() if n >= FEEDBACK_MIN_PAPERS), key=lambda k: (-counts[k], k))
    return [spelling[key] for key in shared[:FEEDBACK_MAX]]

"""``journal_issues``: a journal's years and issues, or one issue's table of contents, from its navi pages.

The journal is named by a paper of it (``record_ref``: its source link, from the stored record or its
detail page), or by its name, ISSN or CN: first the journal evidence already stored (no request; a stored
page that no longer answers is looked up again), then the navi search (``knavi/all/searchbaseinfo``, a name
asked as 刊名(曾用刊名)), where exactly one journal must match: by its current name, else by a former one
its entry or (for the first few hits) its page shows. A name CNKI does not know is JOURNAL_NOT_FOUND with
the closest names CNKI offered (a shorter search when the name found nothing). Its page gives the
``pykm`` and token the fragments are asked with; ``yearList`` (paged, about 20 years a page) the years
and issues; ``papers`` one issue's rows, which become catalogue records (``record_ref``) so every tool
that takes a record works on them. Every request goes through the site's door (``SiteBackend.navi_page``
/ ``navi_post``): charged, paced, challenges to the person, unknown pages a snapshot and PARSER_UNSUPPORTED.
"""

from __future__ import annotations

import difflib
import functools
import re

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import IssueRecord, IssueYear, JournalIssue, JournalIssuesResult, Paper
from cnki_mcp.core.text import title_key
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.navi_parse import (
    SEARCH_URL,
    JournalHit,
    JournalKeys,
    YearList,
    papers_url,
    parse_keys,
    parse_papers,
    parse_search,
    parse_year_list,
    search_form,
    year_list_form,
    year_list_url,
)
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.store.catalog import Catalog

KIND = "issues"
YEAR_PAGES_MAX = 5  # yearList pages read at most (about 100 years)
FORMER_PAGES = 3  # journal pages of a name search read at most to find the journal by a former title
CLOSEST = 10  # names a JOURNAL_NOT_FOUND offers
# An issue given by its yearIssue code rather than its label (No.06 → "06"): codes are long and opaque.
_CODE_CHARS = 9


class IssuesAsked(msgspec.Struct, frozen=True):
    """What a journal_issues call names (validated by tools/journal_issues.py)."""

    journal: str = ""
    issn: str = ""
    cn: str = ""
    record_ref: str = ""
    year: int | None = None
    issue: str = ""
    limit: int = 20
    offset: int = 0


def _norm_code(value: str) -> str:
    return re.sub(r"[\s\-－]", "", value).upper()


def closest_names(hits: list[JournalHit], name: str) -> list[str]:
    """The names of a navi search's journals, closest to ``name`` first."""
    key = title_key(name)
    names = list(dict.fromkeys(h.name for h in hits))
    return sorted(names, key=lambda n: -difflib.SequenceMatcher(None, key, title_key(n)).ratio())[:CLOSEST]


def named_formerly(former: list[str], name: str) -> bool:
    return any(title_key(f) == title_key(name) for f in former)


def pick_journal(hits: list[JournalHit], asked: IssuesAsked) -> JournalHit:
    """The one journal of a navi search that ``asked`` names exactly (ISSN, CN, or a name: the current title,
    else a former one the entry shows)."""
    if asked.issn:
        found = [h for h in hits if h.issn and _norm_code(h.issn) == _norm_code(asked.issn)]
        named = f"ISSN {asked.issn}"
    elif asked.cn:
        found = [h for h in hits if h.cn and _norm_code(h.cn) == _norm_code(asked.cn)]
        named = f"CN {asked.cn}"
    else:
        found = [h for h in hits if title_key(h.name) == title_key(asked.journal)] \
            or [h for h in hits if named_formerly(h.former, asked.journal)]
        named = f"《{asked.journal}》"
    unique = list({h.url: h for h in found}.values())
    if len(unique) == 1:
        return unique[0]
    if unique:
        raise CnkiError(
            "JOURNAL_AMBIGUOUS", f"知网有 {len(unique)} 种期刊与 {named} 相符，请改用 ISSN、CN 或其中一篇论文的 record_ref。",
            details={"journals": [{"name": h.name, "issn": h.issn, "cn": h.cn} for h in unique]},
        )
    raise journal_not_found(hits, asked)


def journal_not_found(hits: list[JournalHit], asked: IssuesAsked) -> CnkiError:
    """No journal of a navi search is the one asked for: the names CNKI offered, the closest first."""
    if not asked.journal:
        named = f"ISSN {asked.issn}" if asked.issn else f"CN {asked.cn}"
        return CnkiError("JOURNAL_NOT_FOUND", f"知网期刊导航中没有找到 {named}。", details={"listed": [h.name for h in hits[:CLOSEST]]})
    listed = closest_names(hits, asked.journal)
    offered = f"知网给出的相近刊名：{'、'.join(listed)}。" if listed else "知网没有给出相近的刊名。"
    return CnkiError("JOURNAL_NOT_FOUND", f"知网期刊导航中没有刊名或曾用刊名为《{asked.journal}》的期刊；{offered}请核对刊名，或改用 ISSN、CN。",
                     details={"listed": listed})


def find_issue(years: list[IssueYear], year: int, issue: str) -> JournalIssue:
    """The issue of ``year`` that ``issue`` names: its code, or its label (06 = 6 = No.06)."""
    wanted = re.sub(r"^(?:No\.?\s*|第)", "", issue.strip(), flags=re.I).removesuffix("期")
    for entry in years:
        if entry.year != year:
            continue
        for item in entry.issues:
            if item.code == issue or item.issue == wanted or (
                wanted.isdigit() and item.issue.isdigit() and int(item.issue) == int(wanted)
            ):
                return item
        raise CnkiError(
            "ISSUE_NOT_FOUND", f"{year} 年没有第 {issue} 期。",
            details={"year": year, "issues": [i.issue for i in entry.issues]},
        )
    raise CnkiError("ISSUE_NOT_FOUND", f"该刊在知网没有 {year} 年的刊期。", details={"years": [y.year for y in years][:30]})


class JournalIssues:
    """journal_issues over one catalogue and site."""

    def __init__(self, catalog: Catalog, site: SiteBackend) -> None:
        self.catalog = catalog
        self.site = site

    async def run(self, op: OperationContext, asked: IssuesAsked) -> JournalIssuesResult:
        op.stage("journal")
        url = await self._journal_url(op, asked)
        try:
            keys = await self._keys(op, url)
        except CnkiError as exc:
            if exc.code != "LOCATOR_EXPIRED" or asked.record_ref:
                raise
            url = await self._searched(op, asked)  # a stored journal page that no longer answers
            keys = await self._keys(op, url)
        if asked.year is None:
            op.stage("years")
            return JournalIssuesResult(journal=keys.name, source_url=url, years=await self._years(op, url, keys))
        op.stage("issue")
        if len(asked.issue) >= _CODE_CHARS:
            chosen = JournalIssue(issue="", code=asked.issue)
        else:
            chosen = find_issue(await self._years(op, url, keys, until=asked.year), asked.year, asked.issue)
        parse = functools.partial(parse_papers, journal=keys.name, year=asked.year, issue=chosen.issue or asked.issue)
        rows = await self.site.navi_post(op, url, papers_url(keys.pykm, chosen.code), "", parse, "navi_papers")
        page = rows[asked.offset : asked.offset + asked.limit]
        stored = self.catalog.upsert(msgspec.structs.replace(row.paper, source_url=url) for row in page)
        end = asked.offset + len(page)
        return JournalIssuesResult(
            journal=keys.name, source_url=url, year=asked.year, issue=chosen.issue or asked.issue, total=len(rows),
            offset=asked.offset, next_offset=end if end < len(rows) else None,
            records=[_record(paper, row.section) for paper, row in zip(stored, page, strict=True)],
        )

    async def _years(self, op: OperationContext, url: str, keys: JournalKeys, until: int | None = None) -> list[IssueYear]:
        """The journal's years, newest first: yearList pages until every year is read (or ``until`` is)."""
        years: list[IssueYear] = []
        for index in range(YEAR_PAGES_MAX):
            part: YearList = await self.site.navi_post(
                op, url, year_list_url(keys.pykm), year_list_form(keys, index), lambda html, _url: parse_year_list(html),
                "navi_years",
            )
            years += part.years
            if not part.years or len(years) >= part.total_years or (until is not None and years[-1].year <= until):
                break
        return years

    async def _keys(self, op: OperationContext, url: str) -> JournalKeys:
        return await self.site.navi_page(op, url, lambda html, _url: parse_keys(html), "navi_journal")

    async def _journal_url(self, op: OperationContext, asked: IssuesAsked) -> str:
        if asked.record_ref:
            return await self._source_of(op, asked.record_ref)
        return self._stored_journal(asked) or await self._searched(op, asked)

    async def _search(self, op: OperationContext, field: str, value: str) -> list[JournalHit]:
        return await self.site.navi_post(op, "", SEARCH_URL, search_form(field, value), parse_search, "navi_search")

    async def _searched(self, op: OperationContext, asked: IssuesAsked) -> str:
        """The journal page the navi search finds for ``asked`` (see the module's docstring)."""
        field, value = ("issn", asked.issn) if asked.issn else ("cn", asked.cn) if asked.cn else ("journal", asked.journal)
        hits = await self._search(op, field, value)
        try:
            return pick_journal(hits, asked).url
        except CnkiError as exc:
            if exc.code != "JOURNAL_NOT_FOUND" or not asked.journal:
                raise
        if not any(h.former for h in hits):  # the entries do not say: the first journal pages do
            for hit in hits[:FORMER_PAGES]:
                if named_formerly((await self._keys(op, hit.url)).former, asked.journal):
                    return hit.url
        if not hits and len(asked.journal) > 2:  # nothing offered: the names a shorter search offers
            hits = await self._search(op, "journal", asked.journal[: max(2, len(asked.journal) // 2)])
        raise journal_not_found(hits, asked)

    def _stored_journal(self, asked: IssuesAsked) -> str:
        """The journal page of stored journal evidence that names the journal asked for (no request)."""
        for quality in self.catalog.store.data.sources.values():
            if not is_site_url(quality.source_url):
                continue
            if asked.issn and quality.issn and _norm_code(quality.issn) == _norm_code(asked.issn):
                return quality.source_url
            if asked.cn and quality.cn and _norm_code(quality.cn) == _norm_code(asked.cn):
                return quality.source_url
            if asked.journal and quality.canonical_title and title_key(quality.canonical_title) == title_key(asked.journal):
                return quality.source_url
        return ""

    async def _source_of(self, op: OperationContext, ref: str) -> str:
        """The journal page of a stored paper: its source link, else the one its detail page shows."""
        paper = self.catalog.store.data.papers.get(ref)
        if paper is None:
            raise CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {ref}。", details={"record_ref": ref})
        if not paper.source_url:
            paper = (self.catalog.upsert([await self.site.detail(op, paper)]))[0]
        if not paper.source_url:
            raise CnkiError("SOURCE_LOCATOR_MISSING", "这篇论文的详情页没有期刊链接（不是期刊论文，或知网没有该刊的页面）。",
                            details={"record_ref": ref, "source": paper.source})
        return paper.source_url


def _record(paper: Paper, section: str) -> IssueRecord:
    return IssueRecord(record_ref=paper.record_ref, title=paper.title, authors=list(paper.authors), pages=paper.pages,
                       section=section, url=paper.url)

"""``author_papers``: what else an author wrote.

With ``record_ref`` the author's name on that paper's detail page links to the author's own page, where
CNKI knows the person by a code whatever institution they wrote at: the listing is the professional search
``AUC=<code>`` (all institutions, all years; ``method="author_page"``), and ``institutions`` are those the
author page and the byline show. Without such a link the byline's institutions (the ``sup`` numbers of the
name) narrow 作者 AND 作者单位, and the answer says papers written elsewhere may be missing
(``method="author_and_institution"``). With ``institution`` the caller gives it; a bare name lists every
namesake's papers, says so (``ambiguous``) and shows the institutions the first few papers' detail pages
give that name. The listing goes through the site's listings (``SiteBackend.grid``: the search template,
pacing, challenges); its rows and every page read become catalogue records.
"""

from __future__ import annotations

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import AuthorPapersResult, Paper, public_paper
from cnki_mcp.core.text import unique_strings
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.author_parse import AuthorPage, Byline, byline_of, is_author_page, parse_author_page
from cnki_mcp.pages.parse import parse_detail
from cnki_mcp.pages.urls import resolve_href
from cnki_mcp.research.backend import SiteBackend, grid_page
from cnki_mcp.site.grid_query import PAGE_SIZE, GridQuery, combine, compile_expression, leaf, quote_value
from cnki_mcp.site.site import bind_detail
from cnki_mcp.store.catalog import Catalog

KIND = "authors"
SAMPLED = 3  # detail pages read to say which institutions a listing's author belongs to
PAGES_MAX = 4  # listing pages read at most (200 rows)
BY_AUTHOR_PAGE = "author_page"
BY_INSTITUTION = "author_and_institution"
BY_NAME = "author_name"


class AuthorAsked(msgspec.Struct, frozen=True):
    author: str
    record_ref: str = ""
    institution: str = ""
    limit: int = 50
    offset: int = 0


def author_expression(author: str, institutions: list[str]) -> dict[str, object]:
    """作者 (exact name) AND 作者单位 (any of ``institutions``, when given)."""
    name = leaf("authors", author, "exact")
    if not institutions:
        return name
    return combine("and", [name, combine("or", [leaf("institutions", i) for i in institutions])])


def author_code_expression(code: str) -> str:
    """The professional search of one person's papers: their author code (AUC, as the grid's author facet)."""
    return f"AUC={quote_value(code)}"


class AuthorPapers:
    """author_papers over one catalogue and site."""

    def __init__(self, catalog: Catalog, site: SiteBackend) -> None:
        self.catalog = catalog
        self.site = site

    async def run(self, op: OperationContext, asked: AuthorAsked) -> AuthorPapersResult:
        institutions: list[str] = []
        method = BY_INSTITUTION if asked.institution else BY_NAME
        message = ""
        person: AuthorPage | None = None
        if asked.record_ref:
            op.stage("paper")
            line = await self._byline(op, self._stored(asked.record_ref), asked.author)
            person = await self._person(op, line)
            if person is not None:
                method, institutions = BY_AUTHOR_PAGE, unique_strings([*person.institutions, *line.institutions])
            else:
                method, institutions = BY_INSTITUTION, line.institutions
                message = (f"这篇论文的详情页没有“{asked.author}”的作者页链接，改按作者 AND 作者单位（{'、'.join(institutions)}）检索："
                           "该作者在其他单位发表的论文可能没有列出。")
        elif asked.institution:
            institutions = [asked.institution]
        op.stage("listing")
        if person is not None:
            query = GridQuery([], sort="date_desc", expert=author_code_expression(person.code))
        else:
            query = GridQuery(compile_expression(author_expression(asked.author, institutions)), sort="date_desc")
        rows, total = await self._rows(op, query, asked.offset + asked.limit)
        stored = self.catalog.upsert(rows)
        if not asked.record_ref:
            op.stage("institutions")
            seen: list[str] = []
            for paper in stored[:SAMPLED]:
                try:
                    seen += (await self._byline(op, paper, asked.author)).institutions
                except CnkiError as exc:
                    if exc.code not in ("AUTHOR_NOT_ON_PAPER", "PARSER_UNSUPPORTED", "LOCATOR_EXPIRED"):
                        raise
                    op.add_error(exc)
            institutions = unique_strings(seen) if not asked.institution or seen else institutions
        ambiguous = method == BY_NAME
        if ambiguous:
            message = (f"只按姓名“{asked.author}”检索，同名作者的论文可能混在一起（前 {min(SAMPLED, len(stored))} 篇的详情页列出了"
                       f" {len(institutions)} 个单位）；请给出 institution，或该作者一篇论文的 record_ref。")
        page = stored[asked.offset : asked.offset + asked.limit]
        end = asked.offset + len(page)
        return AuthorPapersResult(
            author=asked.author, method=method, institutions=institutions, years=sorted({p.year for p in stored if p.year}),
            ambiguous=ambiguous, message=message, total=total, offset=asked.offset,
            next_offset=end if end < (total if total is not None else len(stored)) and end < len(stored) else None,
            records=[public_paper(self.catalog.store.data.papers.get(p.record_ref, p)) for p in page],
        )

    async def _person(self, op: OperationContext, line: Byline) -> AuthorPage | None:
        """The person behind a byline's author link (their own page), None when the name links none."""
        if not line.link or not is_author_page(line.link):
            return None
        op.stage("author")
        return await self.site.read(op, line.link, parse_author_page, "author")

    def _stored(self, ref: str) -> Paper:
        paper = self.catalog.store.data.papers.get(ref)
        if paper is None:
            raise CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {ref}。", details={"record_ref": ref})
        return paper

    async def _rows(self, op: OperationContext, query: GridQuery, wanted: int) -> tuple[list[Paper], int | None]:
        rows: list[Paper] = []
        total: int | None = None
        for page in range(1, PAGES_MAX + 1):
            part = await grid_page(self.site, op, query, page)
            total = part.total if part.total is not None else total
            rows += part.rows
            if part.exhausted or not part.rows or len(rows) >= wanted or (total is not None and len(rows) >= total) \
                    or len(part.rows) < PAGE_SIZE:
                break
        return rows, total

    async def _byline(self, op: OperationContext, paper: Paper, author: str) -> Byline:
        """``author`` as ``paper``'s detail page shows them: the institutions and the author link (absolute);
        the page is stored as the paper's detail."""
        locator = paper.locator or paper.url
        if not locator:
            raise CnkiError("DOCUMENT_NOT_FOUND", "这条记录没有知网入口。", details={"record_ref": paper.record_ref})

        def parse(html: str, url: str) -> tuple[Paper, Byline | None]:
            line = byline_of(html, author)
            if line is not None:
                line.link = resolve_href(line.link, url)
            return bind_detail(paper, parse_detail(html, url), url), line

        detail, line = await self.site.read(op, locator, parse, "detail")
        self.catalog.upsert([detail])
        if line is None:
            raise CnkiError("AUTHOR_NOT_ON_PAPER", f"《{paper.title}》的作者中没有“{author}”。",
                            details={"author": author, "authors": detail.authors})
        if not line.institutions:
            raise CnkiError("AUTHOR_NOT_ON_PAPER", f"《{paper.title}》的详情页没有给出“{author}”的单位。", details={"author": author})
        return line

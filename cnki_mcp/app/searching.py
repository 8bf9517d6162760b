"""A journal's issues, an author's papers and the citation graph."""

from __future__ import annotations

import functools

from cnki_mcp.app.core import AppCore, Reply, progress_of
from cnki_mcp.core import tool_args
from cnki_mcp.core.call import ToolCall, seconds_since
from cnki_mcp.ops.jobs import kind_budget


class SearchTools(AppCore):
    """An author's papers, a journal's issues and the citation graph: author_papers, journal_issues, related_papers."""

    async def author_papers(self, args: tool_args.AuthorPapersArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research.author_papers import KIND, AuthorAsked, AuthorPapers

        asked = AuthorAsked(author=args.author, record_ref=args.record_ref, institution=args.institution,
                            limit=args.limit, offset=args.offset)
        authors = AuthorPapers(await self.catalog(), self.site())
        jobs = await self.jobs()
        job = jobs.start(KIND, kind_budget(KIND, args.on_verification), functools.partial(authors.run, asked=asked))
        return await jobs.inline(job, ctx)

    async def journal_issues(self, args: tool_args.JournalIssuesArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.research.journal_issues import KIND, IssuesAsked, JournalIssues

        asked = IssuesAsked(journal=args.journal, issn=args.issn, cn=args.cn, record_ref=args.record_ref,
                            year=args.year or None, issue=args.issue, limit=args.limit, offset=args.offset)
        issues = JournalIssues(await self.catalog(), self.site())
        jobs = await self.jobs()
        job = jobs.start(KIND, kind_budget(KIND, args.on_verification), functools.partial(issues.run, asked=asked))
        return await jobs.inline(job, ctx)

    async def related_papers(self, args: tool_args.RelatedPapersArgs, ctx: ToolCall | None) -> Reply:
        relations = await self.relations()
        asked = relations.request(args.record_ref, args.title, args.cursor, args.relation)
        hit = None if args.refresh else relations.cached(asked, args.limit)
        if hit is not None:
            return hit
        jobs = await self.jobs()
        job = jobs.start("related", kind_budget("related", args.on_verification), relations.work(asked, args.limit, args.refresh))
        return await jobs.wait(job, args.wait_seconds - seconds_since(ctx), progress_of(ctx))



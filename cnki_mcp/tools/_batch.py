"""The start of a download_papers batch, shared by download_papers (a new batch) and operation_control
(continue: the same batch from its checkpoint)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cnki_mcp.app.core import AppCore
from cnki_mcp.core import settings
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import Budget, Operation, OperationView

if TYPE_CHECKING:
    from cnki_mcp.documents.batch import BatchState


async def start_batch(deps: AppCore, fresh: BatchState | None, budget: Budget, call: ToolCall | None, prior: Operation | None = None) -> OperationView:
    """A batch download: ``fresh`` for a new one, None to go on from ``prior``'s checkpoint."""
    from cnki_mcp.documents import batch

    jobs, engine = await deps.jobs(), await deps.enrichment()
    limit = settings.daily_download_limit(deps.config.daily_download_limit)
    work = functools.partial(batch.run, engine=engine, site=deps.site(), downloads=deps._downloads, fresh=fresh, daily_limit=limit)
    return await jobs.inline(jobs.start(batch.KIND, budget, work, resume_from=prior), call)

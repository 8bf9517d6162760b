"""link_references: the 《titles》 of a text that name known papers made into links to CNKI."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import TEXT_BYTES_MAX, ToolArgs
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.tools import Budget

REFERENCES_MAX = 100  # 《题名》 spans in one text


class Args(ToolArgs):
    text: Annotated[str, Meta(description=f"至多 {TEXT_BYTES_MAX // 1024} KB、{REFERENCES_MAX} 个题名")]
    lookup_missing: Annotated[bool, Meta(description="本地没有的到知网查找")] = False


TITLE = "为题名加知网链接"
DESCRIPTION = (
    "把文本里的《完整论文题名》改为指向知网的 Markdown 链接；给草稿补链接时使用。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=200, seconds=900)


def validate(args: Args, raw: dict[str, Any]) -> None:
    """The text's size in bytes (what a client may send is bounded before any span is looked for)."""
    size = len(args.text.encode("utf-8"))
    if size > TEXT_BYTES_MAX:
        raise CnkiError(
            "INPUT_TOO_LARGE",
            f"text 最大 512 KB（{TEXT_BYTES_MAX} 字节），收到 {size} 字节；请分段处理。",
            details={"bytes": size},
        )


class Linked(msgspec.Struct, kw_only=True):
    """The text with each 《题名》 that names a stored paper linked, and what each title matched."""

    status: str = "completed"
    text: str
    references: list[dict[str, Any]]


Result = OperationView | Linked


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.references.links import Match, find_spans, render

    spans = find_spans(args.text)
    if len(spans) > REFERENCES_MAX:
        raise CnkiError("TOO_MANY_REFERENCES", f"文本中有 {len(spans)} 个《题名》，一次最多处理 {REFERENCES_MAX} 个。")
    store = await deps.store()
    catalog = await deps.catalog()

    def lookup(title: str) -> list[Match]:
        return [Match(record_ref=ref, url=store.data.papers[ref].url) for ref in catalog.by_title(title)]

    def linked() -> Linked:
        text, references = render(args.text, spans, lookup)
        return Linked(text=text, references=msgspec.to_builtins(references))

    missing = [span.title for span in spans if not lookup(span.title)]
    if not (args.lookup_missing and missing):
        return linked()

    async def work(op: OperationContext) -> Linked:
        op.stage("locate")
        _, problems = await (await deps.enrichment()).resolve_titles(op, missing)
        for problem in problems:
            op.add_error(problem)
        return linked()

    jobs = await deps.jobs()
    return await jobs.inline(jobs.start("links", BUDGET.of(), work), call)

"""save_to_zotero: records, with their downloaded files, sent to the Zotero desktop app through its connector."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore, scoped, stored_search
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import ZoteroReply
from cnki_mcp.core.tool_args import ZOTERO_MAX, ToolArgs
from cnki_mcp.tools._fields import WithSearchScope, given

TAG_CHARS = 100
_COLLECTION = "存入的 Zotero 分类：唯一的分类名，或从文库根开始的路径（如 法学/2024）；省略时存入 Zotero 当前选中的分类"


class Args(ToolArgs):
    record_refs: Annotated[list[str], Meta(description=f"要保存的 record_ref 列表，最多 {ZOTERO_MAX} 个")] = []
    search_id: Annotated[str, Meta(description=f"保存某次检索的结果（最多 {ZOTERO_MAX} 篇）")] = ""
    scope: WithSearchScope = "selected"
    collection: Annotated[str, Meta(description=_COLLECTION)] = ""
    attach: Annotated[bool, Meta(description="附上已下载的 PDF/CAJ 文件（默认 true）；没有下载过的文献只存题录")] = True
    tags: Annotated[list[str], Meta(description=f"给这些条目加上的标签，每个 1–{TAG_CHARS} 字，不含英文逗号")] = []


TITLE = "存入 Zotero"
DESCRIPTION = (
    "把文献的题录存入 Zotero 桌面版（经它在本机的连接器，需要先打开 Zotero）；attach=true（默认）时连同已用 download_paper "
    "下载的 PDF/CAJ 作为附件，不会自行下载。同一分类中已存过的不重复保存，结果逐条给出状态。"
    f"一次最多 {ZOTERO_MAX} 篇。"
)
READ_ONLY = False
OPEN_WORLD = True  # Zotero is outside the server: its library changes

Result = ZoteroReply


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """``record_refs`` or ``search_id`` (blank entries dropped), at most ZOTERO_MAX records, before any other rule."""
    args.record_refs = [ref for ref in map(given, args.record_refs) if ref]
    args.search_id = given(args.search_id)
    if not (args.record_refs or args.search_id):
        raise CnkiError("NO_DOCUMENTS", "请提供 record_refs 或 search_id。")
    if len(args.record_refs) > ZOTERO_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE", f"record_refs 最多 {ZOTERO_MAX} 个，收到 {len(args.record_refs)} 个；请分批保存。",
            details={"field": "record_refs"},
        )


def validate(args: Args, raw: dict[str, Any]) -> None:
    """The collection and the tags' form (trimmed in place)."""
    args.collection = given(args.collection)
    args.tags = [tag for tag in map(given, args.tags) if tag]
    bad = [tag for tag in args.tags if "," in tag or len(tag) > TAG_CHARS]
    if bad:
        raise CnkiError(
            "INVALID_TAGS", f"标签须为 1–{TAG_CHARS} 字且不含英文逗号：{'、'.join(bad)}", details={"tags": bad}
        )


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    store = await deps.store()
    refs = list(args.record_refs)
    if args.search_id:
        refs += [e.record_ref for e in scoped(stored_search(store, args.search_id), args.scope)]
    return await deps._zotero.save(store, refs, collection=args.collection, attach=args.attach, tags=args.tags)

"""save_to_zotero: records, with their downloaded files, sent to the Zotero desktop app through its connector."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore, scoped, stored_search
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import ZoteroReply
from cnki_mcp.core.tool_args import ZOTERO_MAX, ToolArgs
from cnki_mcp.tools._fields import ScopeRule, given

TAG_CHARS = 100
NOTE_CHARS = 20000
_COLLECTION = "分类名或路径（如 法学/2024），默认当前分类"


class RecordNote(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    record_ref: str
    text: Annotated[str, Meta(description=f"笔记：纯文本或简单 HTML，至多 {NOTE_CHARS} 字")]


class Args(ToolArgs):
    record_refs: list[str] = []
    search_id: str = ""
    scope: ScopeRule = "selected"
    collection: Annotated[str, Meta(description=_COLLECTION)] = ""
    attach: Annotated[bool, Meta(description="附上已下载的文件")] = True
    tags: Annotated[list[str], Meta(description=f"每个至多 {TAG_CHARS} 字，不含英文逗号")] = []
    notes: Annotated[list[RecordNote], Meta(description="每篇一条笔记，存为子笔记")] = []
    allow_duplicates: Annotated[bool, Meta(description="文库中已有时仍保存")] = False


TITLE = "存入 Zotero"
DESCRIPTION = (
    f"把题录存入 Zotero 桌面版（须已打开），可附上已下载的文件；已存过的不重复存；启用本地 API 时先查整个文库。至多 {ZOTERO_MAX} 篇。"
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
    """The collection, the tags' form (trimmed in place), the notes' size."""
    args.collection = given(args.collection)
    args.tags = [tag for tag in map(given, args.tags) if tag]
    bad = [tag for tag in args.tags if "," in tag or len(tag) > TAG_CHARS]
    if bad:
        raise CnkiError(
            "INVALID_TAGS", f"标签须为 1–{TAG_CHARS} 字且不含英文逗号：{'、'.join(bad)}", details={"tags": bad}
        )
    long = [note.record_ref for note in args.notes if len(note.text) > NOTE_CHARS]
    if long:
        raise CnkiError("INVALID_INPUT", f"笔记最多 {NOTE_CHARS} 字，这些超过了：{'、'.join(long[:10])}；请缩短后重试。",
                        details={"field": "notes", "record_refs": long})


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    store = await deps.store()
    refs = list(args.record_refs)
    if args.search_id:
        refs += [e.record_ref for e in scoped(stored_search(store, args.search_id), args.scope)]
    return await deps._zotero.save(
        store, refs, collection=args.collection, attach=args.attach, tags=args.tags,
        notes={given(note.record_ref): note.text for note in args.notes}, duplicates=args.allow_duplicates,
    )

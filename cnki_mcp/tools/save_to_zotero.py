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
from cnki_mcp.tools._fields import WithSearchScope, given

TAG_CHARS = 100
NOTE_CHARS = 20000
_COLLECTION = "存入的 Zotero 分类：唯一的分类名，或从文库根开始的路径（如 法学/2024）；省略时存入 Zotero 当前选中的分类"


class RecordNote(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    record_ref: Annotated[str, Meta(description="要加笔记的文献")]
    text: Annotated[str, Meta(description=f"笔记：纯文本或简单 HTML，至多 {NOTE_CHARS} 字")]


class Args(ToolArgs):
    record_refs: Annotated[list[str], Meta(description=f"要保存的 record_ref 列表，最多 {ZOTERO_MAX} 个")] = []
    search_id: Annotated[str, Meta(description=f"保存某次检索的结果（最多 {ZOTERO_MAX} 篇）")] = ""
    scope: WithSearchScope = "selected"
    collection: Annotated[str, Meta(description=_COLLECTION)] = ""
    attach: Annotated[bool, Meta(description="附上已下载的 PDF/CAJ 文件（默认 true）；没有下载过的文献只存题录")] = True
    tags: Annotated[list[str], Meta(description=f"给这些条目加上的标签，每个 1–{TAG_CHARS} 字，不含英文逗号")] = []
    notes: Annotated[list[RecordNote], Meta(description="每篇一条笔记，存为条目的子笔记")] = []
    allow_duplicates: Annotated[bool, Meta(description="文库中已有同 DOI 或同题名+年份的条目时仍然保存（默认 false：只在结果中列出）")] = False


TITLE = "存入 Zotero"
DESCRIPTION = (
    "把文献存入 Zotero 桌面版（通过它在本机的连接器，与 Zotero 浏览器插件的方式相同，不经过系统代理）："
    "题名、作者（中文姓名不拆分）、日期、来源、卷期页、DOI、摘要、关键词（作为标签）、语言、网址、中图分类号（在 extra 中），"
    "期刊论文、学位论文（学校与博士/硕士）、会议论文、报纸文章各用对应的条目类型；attach=true（默认）时把已用 "
    f"download_paper 下载的 PDF/CAJ 作为附件一并存入（不会自行下载）。同一分类中已存过的文献不重复保存，"
    "Zotero 启用本地 API 时先查整个文库（DOI 或题名+年份）；"
    f"一条失败不影响其他条目，结果逐条给出状态。需要先打开 Zotero。一次最多 {ZOTERO_MAX} 篇。"
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

"""save_to_zotero: records (and their downloaded PDF/CAJ) sent to the Zotero desktop app's connector.

The connector is Zotero's local HTTP server (``CNKI_ZOTERO_URL``, default ``http://127.0.0.1:23119``),
spoken to as Zotero's own browser connector does, never through a proxy (``HTTP(S)_PROXY``/``ALL_PROXY``
ignored):

- ``GET /connector/ping`` first (3 s): no answer, or one that is not Zotero's "Zotero is running", is
  ZOTERO_UNAVAILABLE at once.
- ``POST /connector/getSelectedCollection``: the current target and every editable library and
  collection (``targets``: ``L<n>``/``C<n>`` ids in tree order with their ``level``), where a collection
  is found by its unique name or its path from the library root (``法学/2024``).
- ``POST /connector/saveItems`` with a new ``sessionID`` (a reused one is 409) and the items, each with
  an ``id``; Zotero answers 500 for the whole batch when one item fails, so a failed batch is sent
  again one item per session, and one failed item does not lose the others.
- ``POST /connector/updateSession`` for a session only when there is something to change, and only
  once the target is resolved (``saveItems`` puts the items in Zotero's current target): the target
  when it is another one, the tags (comma-separated, trimmed, never blank) when there are any; a
  ``tags`` field is never sent empty.
- ``POST /connector/saveAttachment``: the file's bytes, its type, and ``X-Metadata`` (ASCII-only JSON:
  non-ASCII escaped) naming the parent item's ``id`` and the session; 200 means the library's files
  are not editable (nothing stored).

Every read from the connector is bounded in size (``ANSWER_MAX``) and time, on the event loop (no thread
left reading after a timeout): whoever binds the port while Zotero is closed cannot flood the server. An
answer that is not the connector's (garbage, a ``201`` with a body that is not JSON) is never a success.

A record already saved to the same target by this server process is not sent again; one already anywhere in
the library (by DOI, or title and year, asked of Zotero's local API when the person has enabled it: see
zotero_library) is ``already_in_library`` and not sent unless duplicates are asked for. A record's note goes
with its item in ``saveItems`` (``notes``), which Zotero 7 and 8 both store as a child note; updateSession's
``note`` (8 only, one note for every item of the session) is never used. Nothing is ever downloaded here: an
attachment is the download ledger's file, when it is there and unchanged.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any, NamedTuple

import httpx2
import msgspec

from cnki_mcp.core import settings
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, Paper, ZoteroAttachment, ZoteroItem, ZoteroReply, ZoteroTarget
from cnki_mcp.core.tool_args import ZOTERO_MAX
from cnki_mcp.core.zotero_model import ZoteroNote
from cnki_mcp.documents.download_files import unchanged
from cnki_mcp.documents.local_read import ledger_entry
from cnki_mcp.references.zotero_items import (
    ascii_json,
    clean_tags,
    connector_id,
    item_type,
    zotero_item,
)
from cnki_mcp.references.zotero_library import LibraryCheck, find_in_library, unchecked_warning
from cnki_mcp.store.library import Store

DEFAULT_URL = "http://127.0.0.1:23119"
PING_SECONDS = 3.0
CALL_SECONDS = 30.0
ATTACH_SECONDS = 120.0
API_VERSION = "3"
ANSWER_MAX = 4 * 1024 * 1024  # bytes: Zotero's largest answer (every collection) is far smaller
RUNNING = "Zotero is running"  # what Zotero's ping answers


class Answer(NamedTuple):
    status: int
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8") or "null")
        except (UnicodeDecodeError, ValueError):
            return None

    @property
    def words(self) -> str:
        return self.body.decode("utf-8", "replace").strip()[:200]

    def created(self) -> bool:
        """201 with what the connector sends along (nothing, or JSON): a garbage body is not Zotero's."""
        if self.status != 201:
            return False
        if not self.body.strip():
            return True
        try:
            json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return False
        return True


def base_url() -> str:
    return (settings.env_text("CNKI_ZOTERO_URL") or DEFAULT_URL).rstrip("/")


def _unavailable(base: str, why: str) -> CnkiError:
    return CnkiError(
        "ZOTERO_UNAVAILABLE",
        f"连不上 Zotero（{base}：{why}）。请先打开 Zotero 桌面版，等它启动完成后重试；"
        "Zotero 不在本机默认端口 23119 时，用 CNKI_ZOTERO_URL 指定它的地址。",
        retryable=True,
        details={"url": base},
    )


class _TooLarge(Exception):
    pass


async def _request(url: str, body: bytes | None, headers: dict[str, str], timeout: float) -> Answer:
    """One request, its answer read to at most ``ANSWER_MAX`` bytes; never through a proxy."""
    async with httpx2.AsyncClient(trust_env=False, timeout=timeout) as client:
        method = "POST" if body is not None else "GET"
        async with client.stream(method, url, content=body, headers=headers) as response:
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk
                if len(data) > ANSWER_MAX:
                    raise _TooLarge
            return Answer(response.status_code, bytes(data))


class Connector:
    """Zotero's connector endpoints, each call bounded in size and time."""

    def __init__(self, base: str) -> None:
        self.base = base

    async def call(self, path: str, body: bytes | None, headers: dict[str, str], timeout: float = CALL_SECONDS) -> Answer:
        headers = {"X-Zotero-Connector-API-Version": API_VERSION, **headers}
        try:
            # The whole exchange, not each read: a body sent a byte a second would pass a read timeout.
            return await within(_request(self.base + path, body, headers, timeout), timeout)
        except _TooLarge:
            raise _unavailable(self.base, f"答复超过 {ANSWER_MAX // (1024 * 1024)} MB，不像 Zotero 的连接器") from None
        except (TimeoutError, OSError, ValueError, httpx2.HTTPError) as exc:
            raise _unavailable(self.base, type(exc).__name__ if not str(exc) else str(exc)[:120]) from None

    async def get_json(self, path: str, headers: dict[str, str]) -> tuple[int, Any]:
        answer = await self.call(path, None, headers)
        return answer.status, answer.json()

    async def post_json(self, path: str, payload: Any) -> Answer:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return await self.call(path, body, {"Content-Type": "application/json"})

    async def ping(self) -> None:
        answer = await self.call("/connector/ping", None, {}, PING_SECONDS)
        if answer.status != 200:
            raise _unavailable(self.base, f"HTTP {answer.status}")
        if RUNNING not in answer.words:
            raise _unavailable(self.base, "这个端口上的程序不是 Zotero")


def _targets(selected: dict[str, Any]) -> list[dict[str, Any]]:
    """``targets`` of a getSelectedCollection answer, checked: a list of objects with an integer level."""
    targets = selected.get("targets") or []
    if not isinstance(targets, list) or not all(
        isinstance(t, dict) and isinstance(t.get("level") or 0, int) for t in targets
    ):
        raise CnkiError(
            "ZOTERO_UNAVAILABLE",
            "Zotero 连接器返回的分类列表无法识别（targets 不是对象列表）；请确认 23119 端口上运行的是 Zotero 桌面版，"
            "重启 Zotero 后重试。",
            retryable=True,
            details={"targets": type(targets).__name__},
        )
    return targets


def _paths(targets: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(id, library, path below the library) of every target, from their order and levels."""
    out: list[tuple[str, str, str]] = []
    stack: list[str] = []
    for target in targets:
        level = max(0, int(target.get("level") or 0))
        stack = [*stack[:level], str(target.get("name") or "")]
        out.append((str(target.get("id") or ""), stack[0], "/".join(stack[1:])))
    return out


def resolve_target(selected: dict[str, Any], wanted: str) -> tuple[str, str]:
    """(target id, its name or path) for ``collection``: Zotero's current one when ``wanted`` is empty,
    else the collection of that unique name or that path from a library's root."""
    if not wanted.strip():
        current = selected.get("id")
        target = f"C{current}" if current else f"L{selected.get('libraryID') or 1}"
        return target, str(selected.get("name") or selected.get("libraryName") or "")
    paths = [(ident, library, path) for ident, library, path in _paths(_targets(selected)) if path]
    asked = "/".join(part.strip() for part in wanted.strip().strip("/").split("/"))
    found = [(i, p) for i, _, p in paths if p == asked] if "/" in asked else [(i, p) for i, _, p in paths if p.split("/")[-1] == asked]
    if not found:
        raise CnkiError(
            "ZOTERO_COLLECTION_NOT_FOUND",
            f"Zotero 中没有名为“{wanted}”的分类；请先在 Zotero 里建好，或用“上级/下级”写出完整路径。",
            details={"collection": wanted, "available": [p for _, _, p in paths][:50]},
        )
    if len(found) > 1:
        raise CnkiError(
            "ZOTERO_COLLECTION_AMBIGUOUS",
            f"Zotero 中有 {len(found)} 个名为“{wanted}”的分类，请用完整路径指定其中一个。",
            details={"collection": wanted, "candidates": [p for _, p in found]},
        )
    return found[0]


def _failure(answer: Answer, what: str) -> CnkiError:
    if answer.status == 201:  # "created" with a body that is not the connector's: nothing can be trusted
        return CnkiError("ZOTERO_SAVE_FAILED", f"无法确认 Zotero 保存了{what}：答复 HTTP 201 但内容无法识别（{answer.words[:80]}）；"
                         "请确认 23119 端口上运行的是 Zotero，在 Zotero 里查看后再重试。", details={"status": 201})
    return CnkiError("ZOTERO_SAVE_FAILED", f"Zotero 没有保存{what}：HTTP {answer.status} {answer.words}".strip(),
                     details={"status": answer.status})


class ZoteroSaves:
    """save_to_zotero for one process: what was saved where (a record is not sent twice to a target)."""

    def __init__(self) -> None:
        self.saved: set[tuple[str, str]] = set()  # (target, record_ref)

    async def save(
        self, store: Store, refs: list[str], *, collection: str, attach: bool, tags: list[str],
        notes: dict[str, str] | None = None, duplicates: bool = False,
    ) -> ZoteroReply:
        refs = list(dict.fromkeys(refs))
        if len(refs) > ZOTERO_MAX:
            raise CnkiError("BATCH_TOO_LARGE", f"一次最多保存 {ZOTERO_MAX} 篇，收到 {len(refs)} 篇；请分批保存。",
                            details={"count": len(refs)})
        connector = Connector(base_url())
        await connector.ping()
        answer = await connector.post_json("/connector/getSelectedCollection", {})
        selected = answer.json()
        if answer.status != 200 or not isinstance(selected, dict):
            raise _unavailable(connector.base, f"getSelectedCollection 答复 HTTP {answer.status}")
        _targets(selected)
        target, place = resolve_target(selected, collection)
        current, _ = resolve_target(selected, "")
        session_update = _SessionUpdate(target, moved=target != current, tags=clean_tags(tags))
        rows = {ref: ZoteroItem(record_ref=ref) for ref in refs}
        papers = []
        for ref in refs:
            paper = store.data.papers.get(ref)
            row = rows[ref]
            if paper is None:
                missing = CnkiError("RECORD_NOT_FOUND", "本地没有这条记录；请先检索或用 get_metadata 取得它。")
                row.status, row.error = "failed", missing.problem()
                continue
            row.title, row.item_type = paper.title, item_type(paper)
            if (target, ref) in self.saved:
                row.status = "already_saved"
            else:
                papers.append(paper)
        check = LibraryCheck({}) if duplicates else await find_in_library(connector, papers)
        for ref, keys in check.matches.items():
            rows[ref].status, rows[ref].zotero_keys = "already_in_library", keys
        papers = [paper for paper in papers if paper.record_ref not in check.matches]
        notes = {ref: text for ref, text in (notes or {}).items() if text.strip()}
        for paper, session, error in await self._save_items(connector, papers, session_update, notes):
            row = rows[paper.record_ref]
            if error is not None:
                row.error = error.problem()
                if error.code != "ZOTERO_SESSION_FAILED":  # saved, though not where asked: still saved
                    row.status = "failed"
                    continue
            row.status = "saved"
            self.saved.add((target, paper.record_ref))
            if attach:
                row.attachment = await _attach(connector, store, paper, session)
        warnings = [] if duplicates or not check.unchecked else [unchecked_warning(check.unchecked)]
        for ref in notes:
            if ref in rows:
                rows[ref].note = _note(rows[ref])
            else:
                warnings.append(f"笔记对应的 {ref} 不在这次要保存的文献中，未存入。")
        reply = _reply(list(rows.values()), target, place)
        reply.library_checked, reply.warnings = not duplicates and not check.unchecked, warnings
        return reply

    async def _save_items(
        self, connector: Connector, papers: list[Paper], update: _SessionUpdate, notes: dict[str, str]
    ) -> list[tuple[Paper, str, CnkiError | None]]:
        """Every paper (with its note) and the session it was saved in, or why not: one batch, then one by one."""
        if not papers:
            return []
        session, answer = await _save(connector, papers, notes)
        if answer.created():
            problem = await _update(connector, session, update)
            return [(paper, session, problem) for paper in papers]
        _read_only(answer)
        if len(papers) == 1:
            return [(papers[0], session, _failure(answer, "这条记录"))]
        out = []
        for paper in papers:
            out += await self._save_items(connector, [paper], update, notes)
        return out


def _read_only(answer: Answer) -> None:
    body = answer.json()
    if answer.status == 500 and isinstance(body, dict) and body.get("libraryEditable") is False:
        raise CnkiError("ZOTERO_READ_ONLY", "Zotero 当前选中的文库是只读的；请在 Zotero 里选中“我的文库”或可编辑的分类后重试。")


async def _save(connector: Connector, papers: list[Paper], notes: dict[str, str]) -> tuple[str, Answer]:
    """``saveItems`` in a new session (a session id Zotero already has is tried once more with another)."""
    items = [zotero_item(paper, notes.get(paper.record_ref, "")) for paper in papers]
    for _ in range(2):
        session = secrets.token_hex(8)
        answer = await connector.post_json("/connector/saveItems", {"sessionID": session, "items": items})
        if answer.status != 409:
            return session, answer
    return session, answer


class _SessionUpdate(NamedTuple):
    """What ``updateSession`` changes in every session of one save: the resolved target, and the tags."""

    target: str
    moved: bool  # the target is not the one saveItems saved into
    tags: list[str]

    def body(self, session: str) -> dict[str, str] | None:
        """The request's body, or None when there is nothing to change. The target is always named (Zotero
        reads it without a check); ``tags`` only when there are some."""
        if not (self.moved or self.tags):
            return None
        body = {"sessionID": session, "target": self.target}
        if self.tags:
            body["tags"] = ", ".join(self.tags)
        return body


async def _update(connector: Connector, session: str, update: _SessionUpdate) -> CnkiError | None:
    body = update.body(session)
    if body is None:
        return None
    answer = await connector.post_json("/connector/updateSession", body)
    if answer.status == 200:
        return None
    return CnkiError("ZOTERO_SESSION_FAILED", f"条目已存入 Zotero，但没能放进指定分类或加上标签：HTTP {answer.status} {answer.words}",
                     details={"status": answer.status})


_NOTE_LOST = {
    "already_saved": "本次运行已把这篇存入同一分类，没有再存，笔记也未存入；请在 Zotero 里给已有条目添加笔记。",
    "already_in_library": "文库中已有这篇（见 zotero_keys），没有再存，笔记也未存入；请在 Zotero 里给已有条目添加笔记。",
    "failed": "条目没有存入 Zotero，笔记也未存入。",
}


def _note(row: ZoteroItem) -> ZoteroNote:
    """The note went with its saved item (Zotero saves an item's ``notes`` with it, 7 and 8 alike), or why not."""
    if row.status == "saved":
        return ZoteroNote(status="stored")
    return ZoteroNote(status="not_stored", message=_NOTE_LOST.get(row.status, "条目没有存入 Zotero，笔记也未存入。"))


_TYPES = {"pdf": "application/pdf", "caj": "application/octet-stream"}


async def _attach(connector: Connector, store: Store, paper: Paper, session: str) -> ZoteroAttachment:
    """The ledger's file sent as the item's attachment; what happened, for the result."""
    artifact: Artifact | None = ledger_entry(store, paper.record_ref)
    if artifact is None:
        return ZoteroAttachment(status="not_downloaded")
    if not await asyncio.to_thread(unchanged, artifact):
        return ZoteroAttachment(status="file_changed", path=artifact.path)
    kind = artifact.content_format or artifact.format
    data = await asyncio.to_thread(Path(artifact.path).read_bytes)
    metadata = {
        "id": secrets.token_hex(8),
        "parentItemID": connector_id(paper.record_ref),
        "title": f"全文 {kind.upper()}",
        "url": paper.url,
        "sessionID": session,
    }
    headers = {"Content-Type": _TYPES.get(kind, "application/octet-stream"), "X-Metadata": ascii_json(metadata)}
    answer = await connector.call("/connector/saveAttachment", data, headers, ATTACH_SECONDS)
    shown = ZoteroAttachment(status="attached", format=kind, path=artifact.path, bytes=len(data))
    if answer.created():
        return shown
    if answer.status == 200:
        return msgspec.structs.replace(shown, status="not_stored", message=f"Zotero 未保存文件：{answer.words}")
    return msgspec.structs.replace(shown, status="failed", message=f"Zotero 答复 HTTP {answer.status} {answer.words}")


def _reply(rows: list[ZoteroItem], target: str, place: str) -> ZoteroReply:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
        if row.attachment is not None:
            key = f"attachments_{row.attachment.status}"
            counts[key] = counts.get(key, 0) + 1
    errors = [
        msgspec.structs.replace(row.error, details={"record_ref": row.record_ref}) for row in rows if row.error is not None
    ]
    failed = sum(1 for row in rows if row.status == "failed")
    status = "completed" if not errors else ("failed" if failed == len(rows) else "partial")
    return ZoteroReply(status=status, target=ZoteroTarget(target, place), items=rows, summary=counts, errors=errors)

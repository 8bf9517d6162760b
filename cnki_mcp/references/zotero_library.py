"""Is a record already in the person's Zotero library? Asked of Zotero's local API before save_to_zotero saves.

The local API (Zotero 7 and later) answers on the connector's port under ``/api/`` only when the person has
enabled it in Zotero's settings; otherwise it is 403 "Local API is not enabled" (404 on Zotero 6, which has
none). ``GET /api/users/0/items?q=…&qmode=…`` searches the whole of My Library (every collection): a record
matches an item with its DOI (the DOI field, or ``DOI: …`` in extra), or with its title and year. Notes,
attachments, annotations and items in the trash never match.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlencode

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper

LOCAL_API_VERSION = "3"
_NOT_ITEMS = frozenset({"note", "attachment", "annotation"})


class LibraryCheck(NamedTuple):
    """The answer: the matched items' keys per record_ref, or why the library could not be asked."""

    matches: dict[str, list[str]]
    unchecked: str = ""  # why not (the local API is off, missing, or failed); "" when checked


class _Unchecked(Exception):
    pass


class Getter(Protocol):
    """What the check needs of the connector: a bounded GET, its status and JSON body."""

    async def get_json(self, path: str, headers: dict[str, str]) -> tuple[int, Any]: ...


def _title(text: str) -> str:
    """A title compared across sources: case, spaces and punctuation (full-width too) ignored."""
    return re.sub(r"[\W_]+", "", text.casefold())


def _year(date: str) -> int:
    found = re.search(r"\b(\d{4})\b", date or "")
    return int(found.group(1)) if found else 0


def _matches(paper: Paper, data: dict[str, Any]) -> bool:
    if data.get("itemType") in _NOT_ITEMS or data.get("deleted"):
        return False
    doi = paper.doi.strip().casefold()
    if doi and (str(data.get("DOI") or "").strip().casefold() == doi or f"doi: {doi}" in str(data.get("extra") or "").casefold()):
        return True
    if not _title(paper.title) or _title(str(data.get("title") or "")) != _title(paper.title):
        return False
    return paper.year <= 0 or _year(str(data.get("date") or "")) == paper.year


async def _search(getter: Getter, q: str, mode: str) -> list[dict[str, Any]]:
    path = "/api/users/0/items?" + urlencode({"q": q, "qmode": mode})
    status, body = await getter.get_json(path, {"Zotero-API-Version": LOCAL_API_VERSION})
    if status == 403:
        raise _Unchecked("Zotero 的本地 API 没有启用")
    if status == 404:
        raise _Unchecked("这个版本的 Zotero 没有本地 API（需要 Zotero 7 或更新版本）")
    if status != 200 or not isinstance(body, list):
        raise _Unchecked(f"本地 API 答复 HTTP {status}")
    return [entry for entry in body if isinstance(entry, dict) and isinstance(entry.get("data"), dict)]


async def find_in_library(getter: Getter, papers: list[Paper]) -> LibraryCheck:
    """The library's items each record matches (by DOI, then by title and year), or why it was not asked."""
    matches: dict[str, list[str]] = {}
    try:
        for paper in papers:
            found: dict[str, None] = {}
            queries = ([(paper.doi.strip(), "everything")] if paper.doi.strip() else []) + [(paper.title.strip(), "titleCreatorYear")]
            for q, mode in queries:
                if not q:
                    continue
                for entry in await _search(getter, q, mode):
                    if _matches(paper, entry["data"]):
                        found[str(entry.get("key") or entry["data"].get("key") or "")] = None
                if found:
                    break
            if found:
                matches[paper.record_ref] = [key for key in found if key]
    except _Unchecked as why:
        return LibraryCheck({}, str(why))
    except CnkiError as error:
        return LibraryCheck({}, error.message[:120])
    return LibraryCheck(matches)


def unchecked_warning(why: str) -> str:
    return (
        f"没有检查整个 Zotero 文库里是否已有这些文献（{why}）；只避免了本次运行中向同一分类重复保存。"
        "要按 DOI 或题名+年份查重，请在 Zotero 设置的“高级”中勾选“允许此计算机上的其他应用程序与 Zotero 通讯”（本地 API）。"
    )


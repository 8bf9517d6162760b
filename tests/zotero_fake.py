"""A fake of the Zotero desktop app's connector server, for tests (loopback only).

Written from how Zotero's connector endpoints behave (request shapes, status codes, session rules):

- ``GET``/``POST /connector/ping``: 200, "Zotero is running".
- ``POST /connector/getSelectedCollection``: the current library/collection and ``targets`` (``L1``, ``C<n>``
  in tree order, each with ``level``), editable libraries only.
- ``POST /connector/saveItems`` ``{sessionID, items}``: a session id already known is 409
  ``SESSION_EXISTS``; a read-only library 500 ``{libraryEditable: false}``; an item that cannot be saved
  fails the whole batch with 500 (nothing kept from it); else 201 and the items go to the current target.
  An item's ``notes`` (``[{note: html}]``) become its child notes (Zotero 7 and 8 alike).
- ``POST /connector/updateSession`` ``{sessionID, target, tags, note}``: 400 ``SESSION_ID_NOT_PROVIDED`` /
  ``SESSION_NOT_FOUND`` / ``COLLECTION_NOT_FOUND``; no ``target`` is 500 (Zotero indexes it unchecked);
  else the session's items move to ``target`` and their tags become ``tags`` (none when it is absent);
  200 ``{}``. By ``major`` version: 7 splits ``tags`` as a comma-separated string (an array throws: 500)
  and ignores ``note``; 8 takes a string or an array, and adds ``note`` as a child note of every item of
  the session. Every body is kept in ``updates``, in order.
- ``GET /api/users/0/items?q=…&qmode=…`` (the local API, Zotero 7+): 403 "Local API is not enabled" unless
  ``local_api``; a ``Zotero-API-Version`` other than 3 is 501; else every item of the library (``existing``
  and those saved) that the quick search finds: ``titleCreatorYear`` (title, creators, year) or
  ``everything`` (any field), case-insensitive "contains", as ``[{key, version, library, data}]``.
- ``POST /connector/saveAttachment``: body = file bytes, ``Content-Type`` its type, ``X-Metadata`` JSON
  ``{parentItemID, title, url, sessionID}``: 400 ``METADATA_NOT_PROVIDED`` / ``SESSION_ID_NOT_PROVIDED`` /
  ``SESSION_NOT_FOUND``; files not editable → 200 "Library files are not editable."; else 201.
  A header with a non-ASCII byte is refused here with 400 (real servers mangle it).

``hostile`` turns it into whatever else may hold the port while Zotero is closed:

- ``"endless"``: every answer is 200 with a body that never ends (chunks until the client goes, at most
  ``ENDLESS_SECONDS``);
- ``"not_zotero"``: the ping answers 200 with another program's page;
- ``"garbage_201"``: ``saveItems`` and ``saveAttachment`` answer 201 with a body that is not JSON (nothing kept);
- ``"int_targets"``: ``getSelectedCollection``'s ``targets`` is a list of integers.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

ENDLESS_SECONDS = 60.0

@dataclass
class Saved:
    item: dict[str, Any]
    session: str
    target: str
    tags: list[str] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # child notes (HTML)
    key: str = ""


class FakeZotero:
    def __init__(self, collections: list[tuple[int, str, int]] | None = None, major: int = 7, local_api: bool = False) -> None:
        """``collections``: (id, name, level) in tree order under My Library (level 1 = top); ``major``: Zotero 7 or
        8 (see the module's text); ``local_api``: the person enabled the local API in Zotero's settings."""
        self.major = major
        self.local_api = local_api
        self.collections = collections or [(1, "法学", 1), (2, "2024", 2), (3, "经济学", 1), (4, "2024", 2)]
        self.selected: int | None = None  # the collection selected in Zotero's pane (None: the library)
        self.editable = True
        self.files_editable = True
        self.fail_titles: set[str] = set()  # items that make saveItems fail
        self.sessions: dict[str, list[Saved]] = {}
        self.items: list[Saved] = []
        self.searches: list[dict[str, str]] = []  # local API queries as asked
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.updates: list[dict[str, Any]] = []  # updateSession bodies as sent
        self.hostile = ""  # "" | endless | not_zotero | garbage_201 | int_targets (see the module's text)
        self.sent_bytes = 0  # what the endless body sent
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeZotero:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def current(self) -> str:
        return f"C{self.selected}" if self.selected else "L1"

    def add_existing(self, data: dict[str, Any], target: str = "C3") -> str:
        """An item already in the library (saved by the person earlier); its key."""
        saved = Saved(item=data, session="", target=target, key=f"OLD{len(self.items):05d}")
        self.items.append(saved)
        return saved.key

    def by_title(self, title: str) -> list[Saved]:
        return [saved for saved in self.items if saved.item.get("title") == title]

    # --- endpoints -----------------------------------------------------------------------

    def selected_collection(self) -> tuple[int, Any]:
        name = next((n for i, n, _ in self.collections if i == self.selected), "我的文库")
        targets = [{"id": "L1", "name": "我的文库", "filesEditable": self.files_editable, "level": 0}]
        targets += [{"id": f"C{i}", "name": n, "filesEditable": self.files_editable, "level": lvl} for i, n, lvl in self.collections]
        return 200, {"libraryID": 1, "libraryName": "我的文库", "libraryEditable": self.editable,
                     "filesEditable": self.files_editable, "editable": self.editable, "id": self.selected,
                     "name": name, "targets": [1, 2] if self.hostile == "int_targets" else targets}

    def save_items(self, data: dict[str, Any]) -> tuple[int, Any]:
        if self.hostile == "garbage_201":
            return 201, "<html>ok</html>"
        session = data.get("sessionID")
        if session in self.sessions:
            return 409, {"error": "SESSION_EXISTS"}
        self.sessions[session] = []
        if not self.editable:
            return 500, {"libraryEditable": False}
        items = data.get("items") or []
        if any(item.get("title") in self.fail_titles for item in items):
            del self.sessions[session]  # Zotero removes the session of a failed save
            return 500, None
        for item in items:
            notes = [str(n.get("note") if isinstance(n, dict) else n) for n in item.get("notes") or []]
            saved = Saved(item=item, session=session, target=self.current(), notes=notes, key=f"NEW{len(self.items):05d}")
            self.sessions[session].append(saved)
            self.items.append(saved)
        return 201, None

    def update_session(self, data: dict[str, Any]) -> tuple[int, Any]:
        self.updates.append(data)
        session = data.get("sessionID")
        if not session:
            return 400, {"error": "SESSION_ID_NOT_PROVIDED"}
        if session not in self.sessions:
            return 400, {"error": "SESSION_NOT_FOUND"}
        if not data.get("target"):
            return 500, None
        target = str(data["target"])
        if target.startswith("C") and int(target[1:]) not in {i for i, _, _ in self.collections}:
            return 400, {"error": "COLLECTION_NOT_FOUND"}
        raw = data.get("tags") or ""
        if isinstance(raw, list) and self.major < 8:
            return 500, None  # Zotero 7 calls split() on it
        tags = [t.strip() for t in (raw if isinstance(raw, list) else str(raw).split(",")) if t.strip()]
        for saved in self.sessions[session]:
            saved.target, saved.tags = target, tags
            if self.major >= 8 and data.get("note"):
                saved.notes.append(str(data["note"]))
        return 200, {}

    def local_items(self, query: dict[str, str], version: str | None) -> tuple[int, Any]:
        if not self.local_api:
            return 403, "Local API is not enabled"
        if version not in (None, "3"):
            return 501, f"API version not implemented: {version}"
        self.searches.append(query)
        q, mode = query.get("q", "").casefold(), query.get("qmode") or "titleCreatorYear"
        found = []
        for saved in self.items:
            data = saved.item
            if mode == "everything":
                text = json.dumps(data, ensure_ascii=False)
            else:
                names = " ".join(f"{c.get('firstName', '')} {c.get('lastName', '')}" for c in data.get("creators") or [])
                text = f"{data.get('title', '')} {names} {str(data.get('date', ''))[:4]}"
            if q in text.casefold():
                found.append({"key": saved.key, "version": 1, "library": {"type": "user", "id": 0},
                              "data": {**data, "key": saved.key}})
        return 200, found

    def save_attachment(self, headers: Any, body: bytes) -> tuple[int, Any]:
        if self.hostile == "garbage_201":
            return 201, "\x00\xff garbage"
        raw = headers.get("X-Metadata")
        if not raw:
            return 400, {"error": "METADATA_NOT_PROVIDED"}
        if any(ord(char) > 127 for char in raw):
            return 400, {"error": "X-Metadata is not ASCII"}
        metadata = json.loads(raw)
        session = metadata.get("sessionID")
        if not session:
            return 400, {"error": "SESSION_ID_NOT_PROVIDED"}
        if session not in self.sessions:
            return 400, {"error": "SESSION_NOT_FOUND"}
        if not self.files_editable:
            return 200, "Library files are not editable."
        parent = next((s for s in self.sessions[session] if s.item.get("id") == metadata.get("parentItemID")), None)
        if parent is None:
            return 500, None  # Zotero fails on an unknown parent
        parent.attachments.append({"metadata": metadata, "content_type": headers.get("Content-Type"), "bytes": body})
        return 201, None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = b"" if body is None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _endless(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                chunk = b"[" * 65536
                deadline = time.monotonic() + ENDLESS_SECONDS
                try:
                    while time.monotonic() < deadline:
                        self.wfile.write(chunk)
                        fake.sent_bytes += len(chunk)
                except OSError:
                    pass  # the client went away: what it should do

            def do_GET(self) -> None:  # noqa: N802
                fake.requests.append(("GET", self.path))
                url = urlsplit(self.path)
                if fake.hostile == "endless":
                    self._endless()
                elif url.path == "/api/users/0/items":
                    with fake.lock:
                        query = dict(parse_qsl(url.query))
                        self._send(*fake.local_items(query, self.headers.get("Zotero-API-Version")))
                elif fake.hostile == "not_zotero" and self.path == "/connector/ping":
                    self._send(200, "<html><title>Jupyter</title></html>")
                elif self.path == "/connector/ping":
                    self._send(200, "Zotero is running")
                else:
                    self._send(404, "No endpoint found")

            def do_POST(self) -> None:  # noqa: N802
                fake.requests.append(("POST", self.path))
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if fake.hostile == "endless":
                    self._endless()
                    return
                with fake.lock:
                    if self.path == "/connector/saveAttachment":
                        self._send(*fake.save_attachment(self.headers, body))
                        return
                    data = json.loads(body or b"{}")
                    handlers = {
                        "/connector/ping": lambda: (200, "Zotero is running"),
                        "/connector/getSelectedCollection": fake.selected_collection,
                        "/connector/saveItems": lambda: fake.save_items(data),
                        "/connector/updateSession": lambda: fake.update_session(data),
                    }
                    handler = handlers.get(self.path)
                    self._send(*(handler() if handler else (404, "No endpoint found")))

        return Handler

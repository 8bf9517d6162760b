"""The composition root of one server process: ``App`` (``core.AppCore``) owns the store, the catalogue, the
browser and the ``Site``, the jobs and the in-memory caches, each made on first use. Every tool is a module of
``cnki_mcp.tools`` whose ``run(deps, args, call)`` gets this ``App`` as ``deps``; ``App.call`` runs it and adds the
store's warnings. Nothing here imports a working layer at import time, so answering ``initialize`` and
``tools/list`` loads none of them.

May import: fieldcheck, references, documents, research, ops, site, pages, store, core.
"""

from __future__ import annotations

from cnki_mcp.app.core import AppCore, Reply

__all__ = ["App", "Reply"]

App = AppCore

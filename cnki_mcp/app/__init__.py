"""The tool handlers: ``App``, the composition root of one server process (``core.AppCore``: the store, the
catalogue, the browser and the ``Site``, the jobs, the in-memory caches) with one mixin of handlers per area of
tools (``searching``, ``citing``), for the tools not yet moved to their own module of
``cnki_mcp.tools`` (whose ``run(deps, args, call)`` gets this ``App`` as ``deps``).
``surface/tools.py`` registers each remaining handler as ``App.<tool>``. A handler imports the
lower layers it works with when first called, so answering ``initialize`` and ``tools/list`` loads none of them.

May import: fieldcheck, references, documents, research, ops, site, pages, store, core.
"""

from __future__ import annotations

from cnki_mcp.app.citing import ReferenceTools
from cnki_mcp.app.core import Reply
from cnki_mcp.app.searching import SearchTools

__all__ = ["App", "Reply"]


class App(SearchTools, ReferenceTools):
    """Every tool handler of one server process, over the state it shares (``AppCore``)."""

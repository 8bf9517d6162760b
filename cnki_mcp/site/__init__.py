"""The one door to CNKI and the browser under it: every CNKI request is a declared exchange (``registry``)
run by one engine (``exchange``: budget, pacing, route, classification, the person, back-off, parsing,
snapshots) from the door's tabs (``door``, ``site``); result listings and the grid's request language
(``listings``, ``grid_query``), facet panels, JSON APIs, navi pages, the person in the loop (``human``),
login and session, and the browser process itself (``browser``, ``chrome``, ``cdp``, ``page_actions``,
``reaper``, ``discovery``). Only the engine reaches in-page requests and page evaluation (``page_io``).
Operations are ``ops.jobs.OperationContext``.

May import: ops, pages, store, core.
"""

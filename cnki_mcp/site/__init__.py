"""The one door to CNKI and the browser under it: requests charged and paced (``site``, ``limiter``),
result listings and the grid's request language (``listings``, ``grid_query``), JSON APIs, the person in the
loop (``human``), login and session, and the browser process itself (``browser``, ``chrome``, ``cdp``,
``page_actions``, ``reaper``, ``discovery``). What it needs of an operation is the ``SiteOperation`` Protocol.

May import: pages, store, core.
"""

"""Pure readers of CNKI's pages: the result grid, detail and journal pages (``parse``), what a page says
about access (``page_state``), the two reader generations (``reader``), relation lists, shared markup helpers,
which URLs are CNKI's (``urls``).
No I/O and no browser: a page's text in, Structs out.

May import: store, core.
"""

"""Finding papers: concept planning (``query``), professional-search expressions (``expert``), the
``search`` pipeline (``pipeline``), ranking (``rank``), details, journals and title look-ups
(``enrich``), a record's detail page in a tab (``detail_tab``), and the citation graph (``relations``).

May import: ops, site, pages, store, core.
"""

"""References: citation styles and exchange formats (``citations``), exports, 《题名》 links, reference
lists read and checked against CNKI (``reflist``, ``refcompare``, ``refcheck``), and Zotero's connector.

May import: documents, research, ops, site, pages, store, core.
"""

"""The field check: a fixed tour of CNKI's pages that says, step by step, whether the site still looks
as the product expects (``tour``), and the report bundle a user can send when it does not (``report``).

May import: references, documents, research, ops, site, pages, store, core.
"""

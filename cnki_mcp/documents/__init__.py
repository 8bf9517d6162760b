"""Papers' contents: the online reader (``online_reader``), downloads and the files they leave
(``download``, ``download_files``), and downloaded PDFs and CAJs read locally (``local_read``,
``pdf_text``, ``pdf_layout``).

May import: research, ops, site, pages, store, core.
"""

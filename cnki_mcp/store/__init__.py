"""The data directory's library: records, searches, operations, the download ledger, relation lists and
checks (``library``), the directory lock, and the catalogue of records with their identities (``catalog``).

May import: core.
"""

"""The data directory's library: research.db (SQLite) with its schema, migrations and writer thread (``db``),
its sections as mappings (``tables``), moving the library in and out — research.json of earlier versions, a
damaged database, ``store --dump`` (``migrate``) — the store itself with the directory lock, retention and
warnings (``library``), and the catalogue of records with their identities (``catalog``).

May import: core.
"""

"""Transports beyond one stdio client: the owner of a data directory and its loopback endpoint
(``owner``, ``endpoint``: streamable HTTP behind a token), and the relay a joined server runs (``relay``).

May import: surface, app and everything below them.
"""

"""The shared ground: the JSON contract (model, tool_args), error codes, clock, settings, text rules,
record identity, redaction, safe files, snapshots, the log, and Han-character tables (loaded on first use).

May import: nothing of cnki_mcp but itself (and the root package for its version).
"""

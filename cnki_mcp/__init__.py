"""cnki-mcp: a local MCP server that lets an AI client work with CNKI through the user's own browser."""

__version__ = "0.1.0"

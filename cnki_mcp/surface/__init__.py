"""The MCP surface: the tool registry (``tools``: name, description, schema, Struct, validator,
annotations and handler in one ``register`` call), the argument rules (``arguments``), the server (list,
dispatch, resources, prompts) and the stdio line layer (``wire``).

May import: app and everything below it.
"""

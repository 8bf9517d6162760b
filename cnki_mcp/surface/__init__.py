"""The MCP surface: the discovered tools served (``tools``: listed as MCP tools, arguments parsed, runs
dispatched on the ``App``), the server (list, dispatch, resources, prompts), the search as an MCP App page (``apps``, ``search_app.html``)
and the stdio line layer (``wire``).

May import: tools, app and everything below them.
"""

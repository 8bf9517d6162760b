"""The MCP surface: the discovered tools served (``tools``: listed as MCP tools, arguments parsed, runs
dispatched on the ``App``), the server (list, dispatch, resources, prompts), the search as an MCP App page
(``apps``, ``search_app.html``), the person asked in the client when an operation waits for them (``elicit``) and
the stdio line layer (``wire``).

May import: tools, app and everything below them.
"""

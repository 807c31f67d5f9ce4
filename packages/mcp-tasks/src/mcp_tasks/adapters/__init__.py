"""Adapters: the engine plugged into the official MCP SDK (``sdk``), FastMCP (``fastmcp``,
needs the ``fastmcp`` extra) and ASGI servers (``asgi``; ``listener``: the socket we bind
for one)."""

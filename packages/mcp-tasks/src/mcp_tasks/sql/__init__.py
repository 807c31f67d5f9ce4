"""What the SQL stores share: one table definition, its statements, the row codec, the store logic.

Only the SQL distributions (``mcp-tasks-sqlite``, ``mcp-tasks-postgres``) import this package;
it needs SQLAlchemy, which they depend on. ``mcp_tasks`` itself never imports it.
"""

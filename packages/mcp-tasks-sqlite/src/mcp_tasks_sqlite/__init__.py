"""The SQLite Store of mcp-tasks (aiosqlite): ``sqlite:///path/to/tasks.db``."""

from mcp_tasks_sqlite.store import SQLiteTaskStore, from_url

__all__ = ["SQLiteTaskStore", "from_url"]

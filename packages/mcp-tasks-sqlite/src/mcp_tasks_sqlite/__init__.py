"""The SQLite Store of mcp-tasks: ``sqlite:///path/to/tasks.db``."""

from mcp_tasks_sqlite.store import (
    SQLiteDialect,
    SQLiteStoreBackend,
    SQLiteTaskStore,
    backend,
    from_url,
)

__all__ = ["SQLiteDialect", "SQLiteStoreBackend", "SQLiteTaskStore", "backend", "from_url"]

"""A MariaDB / MySQL Store for mcp-tasks: ``mysql://user@host/database?table_prefix=ns_``."""

from mcp_tasks_mysql.dialect import MySQLDialect
from mcp_tasks_mysql.store import MySQLStoreBackend, MySQLTaskStore, backend

__all__ = ["MySQLDialect", "MySQLStoreBackend", "MySQLTaskStore", "backend"]

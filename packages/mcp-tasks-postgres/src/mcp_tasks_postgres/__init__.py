"""The PostgreSQL Store of mcp-tasks (asyncpg): ``postgresql://user@host/db``."""

from mcp_tasks_postgres.store import PostgresTaskStore, from_url

__all__ = ["PostgresTaskStore", "from_url"]

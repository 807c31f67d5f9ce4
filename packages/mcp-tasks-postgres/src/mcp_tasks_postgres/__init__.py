"""The PostgreSQL Store of mcp-tasks (asyncpg): ``postgresql://user@host/db?schema=name``."""

from mcp_tasks_postgres.store import (
    PostgresDialect,
    PostgresStoreBackend,
    PostgresTaskStore,
    backend,
    from_url,
)

__all__ = ["PostgresDialect", "PostgresStoreBackend", "PostgresTaskStore", "backend", "from_url"]

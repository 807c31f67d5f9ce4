"""The database servers of the suite's CPU-accounting tests (``mcp_tasks_contract.servers``:
the environment's, else an embedded one; a missing one skips locally and fails in CI)."""

from mcp_tasks_contract.servers import postgres_url, redis_url

__all__ = ["postgres_url", "redis_url"]

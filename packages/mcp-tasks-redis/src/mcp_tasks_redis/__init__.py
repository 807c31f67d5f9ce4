"""The Redis Store of mcp-tasks (redis.asyncio): ``redis://host:6379/0?prefix=name``."""

from mcp_tasks_redis.store import RedisStoreBackend, RedisTaskStore, backend, from_url

__all__ = ["RedisStoreBackend", "RedisTaskStore", "backend", "from_url"]

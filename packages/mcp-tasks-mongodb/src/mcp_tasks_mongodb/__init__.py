"""The MongoDB Store of mcp-tasks (PyMongo's AsyncMongoClient): ``mongodb://host/db?prefix=name``."""

from mcp_tasks_mongodb.store import MongoStoreBackend, MongoTaskStore, backend, from_url

__all__ = ["MongoStoreBackend", "MongoTaskStore", "backend", "from_url"]

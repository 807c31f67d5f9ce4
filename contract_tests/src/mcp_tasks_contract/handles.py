"""Store handles of one contract test: a fresh namespace, and every handle closed at teardown."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from mcp_tasks import Store, StoreOptions

StoreFactory: TypeAlias = Callable[[str, StoreOptions], Awaitable[Store]]
"""What the ``store`` fixture provides: ``await factory(namespace, options)`` opens a NEW
handle (its own connection or client) on ``namespace``. Handles on the same namespace
share its tasks, the way connections share a database."""


def new_namespace() -> str:
    """A fresh namespace: lowercase, digits and ``_``; safe as a SQL schema or a key prefix."""
    return "mcpt_" + secrets.token_hex(6)


class StoreHandles:
    """Opens handles through the author's factory and closes every one of them at teardown."""

    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory
        self.namespace = new_namespace()
        self._opened: list[Store] = []

    async def open(
        self, options: StoreOptions | None = None, *, namespace: str | None = None
    ) -> Store:
        """A new handle on this test's namespace (or ``namespace``)."""
        handle = await self._factory(namespace or self.namespace, options or StoreOptions())
        self._opened.append(handle)
        return handle

    async def open_many(self, count: int, options: StoreOptions | None = None) -> list[Store]:
        """``count`` separate handles on this test's namespace: one per concurrent actor."""
        return [await self.open(options) for _ in range(count)]

    async def aclose(self) -> None:
        """Close every handle this test opened (``close`` is idempotent, so twice is fine)."""
        opened, self._opened = self._opened, []
        for handle in opened:
            await handle.close()

"""Store handles of one contract test: a fresh namespace, and every handle closed at teardown."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import TypeAlias

import anyio

from mcp_tasks import ManualClock, NewTask, Store, StoreOptions, new_task_id
from mcp_tasks.stores.encrypted import Keyring, encrypting

StoreFactory: TypeAlias = Callable[[str, StoreOptions], Awaitable[Store]]
"""What the ``store`` fixture provides: ``await factory(namespace, options)`` opens a NEW
handle (its own connection or client) on ``namespace``. Handles on the same namespace
share its tasks, the way connections share a database."""


def new_namespace() -> str:
    """A fresh namespace: lowercase, digits and ``_``; safe as a SQL schema or a key prefix."""
    return "mcpt_" + secrets.token_hex(6)


#: How long :meth:`StoreHandles.wait_past` waits for a real store clock before it fails.
CLOCK_WAIT_LIMIT_S = 30.0


class StoreHandles:
    """Opens handles through the author's factory and closes every one of them at teardown.

    With ``keys`` every handle it opens is wrapped to seal what the tasks carry of their
    users' data, so the whole suite runs on the store as ``Tasks(encryption_keys=…)`` uses it.

    Time: with a ``clock`` (the :class:`ManualClock` every handle of the factory uses), the
    suite moves time by advancing it; without one the store runs on a real clock, which
    :meth:`wait_past` waits for, reading the store's own clock (never the test's).
    """

    def __init__(
        self,
        factory: StoreFactory,
        clock: ManualClock | None = None,
        keys: Keyring | None = None,
    ) -> None:
        self._factory = factory
        self.clock = clock
        #: With keys (``--contract-encrypted``), every handle seals the tasks' user data
        #: (:class:`~mcp_tasks.stores.encrypted.EncryptedStore`) and the suite runs on that.
        self.keys = keys
        self.namespace = new_namespace()
        self._opened: list[Store] = []
        self._probe: Store | None = None

    async def now(self) -> int:
        """The store's clock now (epoch ms). On a real clock: the ``created_at`` of a task
        created in a namespace of its own, so this test's tasks, counts and reaps are
        untouched."""
        if self.clock is not None:
            return self.clock()
        if self._probe is None:
            self._probe = await self.open(namespace=self.namespace + "_clock")
        probe = await self._probe.create(NewTask(task_id=new_task_id(), ttl_ms=1))
        return probe.created_at

    async def wait_past(self, epoch_ms: int) -> None:
        """Return once the store's clock is past ``epoch_ms``: whatever expires or runs out at
        ``epoch_ms`` (a TTL, a lease, a retention, ``retry_at``) has then surely done so,
        however long the test's own steps took. A manual clock is advanced; a real one is
        waited for (failing after :data:`CLOCK_WAIT_LIMIT_S`)."""
        if self.clock is not None:
            if self.clock() <= epoch_ms:
                self.clock.advance(epoch_ms + 1 - self.clock())
            return
        with anyio.fail_after(CLOCK_WAIT_LIMIT_S):
            while True:
                now = await self.now()
                if now > epoch_ms:
                    return
                await anyio.sleep((epoch_ms + 1 - now) / 1000)

    async def open(
        self, options: StoreOptions | None = None, *, namespace: str | None = None
    ) -> Store:
        """A new handle on this test's namespace (or ``namespace``)."""
        handle = await self._factory(namespace or self.namespace, options or StoreOptions())
        self._opened.append(handle)
        handle = encrypting(handle, self.keys)
        return handle

    async def open_many(self, count: int, options: StoreOptions | None = None) -> list[Store]:
        """``count`` separate handles on this test's namespace: one per concurrent actor."""
        return [await self.open(options) for _ in range(count)]

    async def aclose(self) -> None:
        """Close every handle this test opened (``close`` is idempotent, so twice is fine)."""
        opened, self._opened, self._probe = self._opened, [], None
        for handle in opened:
            await handle.close()

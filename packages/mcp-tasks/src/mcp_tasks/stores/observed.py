"""Every store operation as a span and a latency measurement, whatever the Store.

The runner, the engine and ``TaskControl`` wrap the Store they are given in an
:class:`ObservedStore` (:func:`observed`), so a third-party store is observed like ours
without a line of its own. Each operation is one client span (``mcp_tasks.store.<op>``,
with the database semantic conventions' ``db.system.name`` and ``db.operation.name``;
never a value of the call) and one ``db.client.operation.duration`` measurement; a store
that could not answer (``StoreUnavailable``, or an error outside the contract) also counts
in ``mcp_tasks.store.errors``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from opentelemetry.trace import SpanKind, StatusCode

from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable
from mcp_tasks.stores.abilities import Located
from mcp_tasks.stores.encrypted import EncryptedStore
from mcp_tasks.stores.protocol import STORE_OPERATIONS
from mcp_tasks.telemetry import (
    DB_OPERATION,
    DB_SYSTEM,
    ERROR_TYPE,
    SpanScope,
    instruments,
    tracing,
    tracing_suppressed,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

    from mcp_tasks.domain.models import (
        Claimed,
        Lease,
        NewTask,
        StatusChange,
        TaskRecord,
        Transition,
    )
    from mcp_tasks.domain.rules import OwnerArg, WorkTypes
    from mcp_tasks.stores.protocol import Store

__all__ = ["ObservedStore", "backend_name", "observed", "unobserved"]

#: URL schemes named as the database semantic conventions name their systems.
_SYSTEMS: Final = {
    "postgres": "postgresql",
    "rediss": "redis",
    "redis+unix": "redis",
    "mongodb+srv": "mongodb",
}


def backend_name(store: Store) -> str:
    """The store's backend as ``db.system.name`` names it (``postgresql``, ``sqlite``,
    ``redis``, ``mongodb``, ``memory``): its location's scheme, else its class's name."""
    store = unobserved(store)
    if not isinstance(store, Located):
        return type(store).__name__
    scheme = store.location.scheme
    return _SYSTEMS.get(scheme, scheme)


class _Operation:
    """One store operation's span and measurements (a plain class: it runs on every call).
    Where spans are suppressed (:class:`~mcp_tasks.telemetry.Untraced`), measurements only."""

    __slots__ = ("_attributes", "_scope", "_start")

    def __init__(self, span_name: str, attributes: dict[str, str]) -> None:
        self._attributes = attributes
        self._scope = (
            SpanScope(
                span_name, attributes, kind=SpanKind.CLIENT, expected=(MCPTasksError,), live=True
            )
            if tracing() and not tracing_suppressed()
            else None
        )
        self._start = 0.0

    def __enter__(self) -> None:
        if self._scope is not None:
            self._scope.__enter__()
        self._start = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        elapsed = time.perf_counter() - self._start
        attributes = self._attributes
        failed = kind is not None and (
            issubclass(kind, StoreUnavailable) or not issubclass(kind, MCPTasksError)
        )
        if kind is not None:
            attributes = {**attributes, ERROR_TYPE: kind.__qualname__}
        if failed:
            instruments.store_errors.add(1, attributes)
        instruments.store_duration.record(elapsed, attributes)
        if self._scope is not None:
            if failed:
                self._scope.span.set_status(StatusCode.ERROR)
            self._scope.__exit__(kind, error, traceback)


class ObservedStore:
    """A :class:`~mcp_tasks.stores.protocol.Store` that observes each operation of the
    store it wraps (:attr:`inner`). It offers the ten operations only: what else the
    store offers (:mod:`mcp_tasks.stores.abilities`) is asked of :attr:`inner`
    (:func:`unobserved`)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        system = backend_name(inner)
        # Built once per operation: this runs on every store call.
        self._operations = {
            operation: (
                f"mcp_tasks.store.{operation}",
                {DB_SYSTEM: system, DB_OPERATION: operation},
            )
            for operation in STORE_OPERATIONS
        }

    def __repr__(self) -> str:
        return repr(self.inner)

    def _observe(self, operation: str) -> _Operation:
        return _Operation(*self._operations[operation])

    async def create(self, task: NewTask) -> TaskRecord:
        with self._observe("create"):
            return await self.inner.create(task)

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        with self._observe("get"):
            return await self.inner.get(task_id, owner)

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        with self._observe("update"):
            return await self.inner.update(task_id, owner, input_responses)

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        with self._observe("cancel"):
            return await self.inner.cancel(task_id, owner)

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        with self._observe("put_status"):
            return await self.inner.put_status(
                task_id,
                change,
                lease=lease,
                expected_revision=expected_revision,
                event_id=event_id,
            )

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: WorkTypes = None,
    ) -> Claimed | None:
        with self._observe("claim"):
            return await self.inner.claim(
                worker_id, lease_ms=lease_ms, task_id=task_id, work_types=work_types
            )

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        with self._observe("renew"):
            return await self.inner.renew(lease, lease_ms=lease_ms)

    async def release(self, lease: Lease) -> None:
        with self._observe("release"):
            await self.inner.release(lease)

    async def reap(self, *, limit: int = 500) -> int:
        with self._observe("reap"):
            return await self.inner.reap(limit=limit)

    async def close(self) -> None:
        with self._observe("close"):
            await self.inner.close()


def observed(store: Store) -> Store:
    """``store`` observed: wrapped in an :class:`ObservedStore`, unless it is one already."""
    return store if isinstance(store, ObservedStore) else ObservedStore(store)


def unobserved(store: Store) -> Store:
    """The store an :class:`ObservedStore` wraps, and inside it the store an
    :class:`~mcp_tasks.stores.encrypted.EncryptedStore` wraps (``store`` itself when
    neither): the one to ask what it offers beyond the ten operations."""
    if isinstance(store, ObservedStore):
        store = store.inner
    return store.inner if isinstance(store, EncryptedStore) else store

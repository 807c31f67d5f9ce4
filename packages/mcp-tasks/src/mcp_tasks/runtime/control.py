"""Manual mode: ``defer`` hands a task to a job system; ``TaskControl`` drives it by id."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Self

from pydantic import BaseModel

from mcp_tasks.domain.errors import TaskNotFound
from mcp_tasks.domain.models import (
    Complete,
    Fail,
    Outcome,
    Progress,
    RequireInput,
    TaskRecord,
    Transition,
    is_positive_ms_or_none,
    validate_input_requests,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.runtime.context import check_input_requests
from mcp_tasks.runtime.notifier import Publisher, publisher_for
from mcp_tasks.stores.observed import observed
from mcp_tasks.telemetry import count_end

if TYPE_CHECKING:
    from types import TracebackType

    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue
    from mcp_tasks.runtime.notifier import Notifier
    from mcp_tasks.stores.protocol import Store


class Unset:
    """The type of :data:`UNSET`: "not given, use the default" where ``None`` means something."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset()

StartFunction = Callable[[str], "Awaitable[object] | object"]


@dataclass(frozen=True)
class Deferred:
    """What a manual-mode tool returns: create the task, then call ``start(task_id)``."""

    start: StartFunction
    ttl_ms: int | Unset | None = UNSET
    poll_interval_ms: int | None = None
    status_message: str | None = None
    unknown: Mapping[str, object] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What is wrong with this descriptor (empty when it can be used)."""
        found = [f"unknown attribute {name!r}" for name in self.unknown]
        # The annotations say what callers should pass; these checks catch what they did.
        start: object = self.start
        message: object = self.status_message
        if not callable(start):
            found.append("start must be callable")
        if not isinstance(self.ttl_ms, Unset) and not is_positive_ms_or_none(self.ttl_ms):
            found.append("ttl_ms must be a positive integer or None")
        if not is_positive_ms_or_none(self.poll_interval_ms):
            found.append("poll_interval_ms must be a positive integer or None")
        if not isinstance(message, str | None):
            found.append("status_message must be a string or None")
        return found


def defer(
    start: StartFunction,
    *,
    ttl_ms: int | Unset | None = UNSET,
    poll_interval_ms: int | None = None,
    status_message: str | None = None,
    **unknown: object,
) -> Deferred:
    """Return this from a manual-mode tool: the engine creates the task (with no work for the
    in-process runner) and calls ``start(task_id)``, e.g. to enqueue a job elsewhere.

    If ``start`` raises, the client still gets its task, which fails with -32603. Unknown or
    ill-typed attributes are logged and answered -32603, and no task is created.
    """
    return Deferred(start, ttl_ms, poll_interval_ms, status_message, dict(unknown))


class DeferSlot:
    """Where a manual tool's wrapper leaves its :class:`Deferred` for the engine."""

    def __init__(self) -> None:
        self.deferred: Deferred | None = None


defer_slot: ContextVar[DeferSlot | None] = ContextVar("mcp_tasks_defer_slot", default=None)


def tool_result(value: object) -> JSONObject:
    """A ``CallToolResult`` object from what a worker hands over: text, a mapping or a model."""
    if isinstance(value, BaseModel):
        dumped: JSONObject = value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    if isinstance(value, Mapping):
        return dict(value)
    return {"content": [{"type": "text", "text": str(value)}], "isError": False}


class TaskControl:
    """Drive a task by id alone, from any process that can reach the Store.

    Writes are unleased: they are refused (``StaleLease``) while an in-process runner
    holds a claim, so manual and runner-driven tasks do not mix.

    Each write may carry an ``event_id`` (store contract S-PUT.2): the same id written
    again with the same change answers outcome ``duplicate`` and writes nothing, even after
    the task ended (with another change it raises ``EventIdReused``). A job that a queue
    may deliver twice (a worker killed mid-job, the job redelivered) names each of its
    steps so, and its second run replays its first one's writes as no-ops. A task
    remembers the ids of its last 64 applied writes.

    Each write is then published, so listen streams and waiters on every process wake at
    once rather than at their next poll. ``notifier``: by default the store's own
    cross-process notifier (:func:`~mcp_tasks.notifier_for`), used to publish only (no
    listening): on Postgres, Redis and MongoDB it opens one connection at the first write,
    which :meth:`aclose` (or leaving ``async with TaskControl(store) as control:``) frees.
    A :class:`~mcp_tasks.Notifier` publishes through that one (``Tasks.control()`` passes
    its own); ``None`` publishes nothing. A publish that fails is logged, never raised.
    """

    def __init__(self, store: Store, notifier: Notifier | Unset | None = UNSET) -> None:
        #: The store, observed (:mod:`mcp_tasks.stores.observed`): each operation a span.
        self.store = observed(store)
        self._publisher: Publisher | None
        if isinstance(notifier, Unset):
            self._publisher = publisher_for(store)
        elif notifier is None:
            self._publisher = None
        else:
            self._publisher = Publisher(notifier, owned=False)
        #: What publishes each write (``None``: nothing does).
        self.notifier: Notifier | None = (
            self._publisher.notifier if self._publisher is not None else None
        )

    def __repr__(self) -> str:
        return f"TaskControl({self.store!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Free what publishing opened (the default notifier's connection). The store is
        not closed (it is the caller's); the control may still be used, and reopens."""
        if self._publisher is not None:
            await self._publisher.aclose()

    async def _put(
        self,
        task_id: str,
        change: Complete | Fail | Progress | RequireInput,
        event_id: str | None,
    ) -> Transition:
        transition = await self.store.put_status(task_id, change, event_id=event_id)
        if transition.outcome is Outcome.APPLIED:
            count_end(transition.record)
        if self._publisher is not None:
            await self._publisher.publish(task_id)
        return transition

    async def complete(
        self,
        task_id: str,
        result: object,
        *,
        status_message: str | None = None,
        event_id: str | None = None,
    ) -> Transition:
        """Finish with a tool result (text, a ``CallToolResult`` or its mapping)."""
        change = Complete(tool_result(result), status_message)
        return await self._put(task_id, change, event_id)

    async def fail(
        self,
        task_id: str,
        message: str,
        *,
        code: int = -32603,
        data: JSONValue = None,
        status_message: str | None = None,
        event_id: str | None = None,
    ) -> Transition:
        """Finish with a JSON-RPC error (a protocol failure, not a tool error)."""
        error: JSONObject = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return await self._put(task_id, Fail(error, status_message), event_id)

    async def require_input(
        self,
        task_id: str,
        requests: Mapping[str, Mapping[str, Any]],
        *,
        status_message: str | None = None,
        event_id: str | None = None,
    ) -> Transition:
        """Park the task in ``input_required``; answers appear on :meth:`status`'s record.

        Raises:
            MissingClientCapability: the client that created the task did not declare this
                kind of input (its capabilities are on the task's record); nothing is sent.
            TaskNotFound: unknown or expired.
        """
        change = RequireInput(validate_input_requests(requests), status_message)
        record = await self.store.get(task_id, ANY_OWNER)
        if record.client_capabilities is not None:
            check_input_requests(change.requests, record.client_capabilities)
        return await self._put(task_id, change, event_id)

    async def progress(
        self, task_id: str, message: str, *, event_id: str | None = None
    ) -> Transition:
        """Record progress as the task's ``statusMessage``."""
        return await self._put(task_id, Progress(message), event_id)

    async def is_cancelled(self, task_id: str) -> bool:
        """Whether the worker should stop: the task was cancelled, or is gone."""
        try:
            record = await self.store.get(task_id, ANY_OWNER)
        except TaskNotFound:
            return True
        return record.status is TaskStatus.CANCELLED

    async def status(self, task_id: str) -> TaskRecord:
        """The task's record (status, input answers, result).

        Raises:
            TaskNotFound: unknown or expired.
        """
        return await self.store.get(task_id, ANY_OWNER)

"""What every store backend does beside the rules: its driver's failures surface as
:class:`~mcp_tasks.domain.errors.StoreUnavailable`, no operation waits longer than the
store's bound (``StoreOptions.timeout_ms``, also ``?timeout_ms=`` in its URL), and a closed
handle refuses every operation (``S-CLOSE``).

A backend names the exception types of its driver that mean "the backend could not be
reached or did not answer" (a connection refused or lost, a timeout, a server error);
which ones those are is the backend's to decide, and only those become
``StoreUnavailable`` (with the driver's error as ``__cause__``). The contract's own
errors (:class:`~mcp_tasks.domain.errors.MCPTasksError`: a rule's answer, a
``StoreUnavailable`` raised on purpose) pass through unchanged, also when one of them
subclasses a listed type; anything else (a bug, a cancellation) passes through too::

    from mcp_tasks.stores.kit import CloseGuard, DriverErrors

    UNAVAILABLE = DriverErrors(mysql.connector.Error, OSError, TimeoutError)

    class MySQLTaskStore:
        def __init__(self, url: str) -> None:
            self._guard = CloseGuard()
            ...

        async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
            self._guard.check()  # StoreUnavailable("The store is closed") once closed
            with UNAVAILABLE:
                row = await self._pool.fetch_one(...)
            ...

        async def close(self) -> None:
            if self._guard.close():  # the first close only: close() is idempotent
                with UNAVAILABLE:
                    await self._pool.close()

A :class:`DriverErrors` holds no state of a call: one object serves every operation of
every handle, nested and concurrent alike.

The bound on waiting: the core reads ``?timeout_ms=`` once, into the
:class:`~mcp_tasks.stores.location.StoreLocation` and the options a backend's ``open`` is
given; the backend sets its driver's own timeouts
(connect, socket or command, pool acquire, lock wait) from ``options.timeout_ms``, and
wraps each operation in :func:`within` where the driver has no overall bound of its own
(a driver that retries, a transaction of several statements)::

        async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
            self._guard.check()
            with within(self.options.timeout_ms), UNAVAILABLE:
                row = await self._pool.fetch_one(...)

One bound per request: the engine serves each request's store work inside
:func:`request_bound`, and there every :func:`within` of the task serving it ends by the
bound counted from the request's start, not from its own: a request that calls the store
several times (a read, then a write) waits no longer in all than one operation may. A
driver deadline of its own (a timeout the driver takes per call) is set from what
:func:`within` yields, the time left.
"""

from __future__ import annotations

import asyncio
import math
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable
from mcp_tasks.stores.location import TIMEOUT_PARAM

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator
    from types import TracebackType

__all__ = [
    "CLOSED_MESSAGE",
    "TIMEOUT_PARAM",
    "CloseGuard",
    "DriverErrors",
    "detach",
    "detached",
    "request_bound",
    "rest_of_request",
    "within",
]

R = TypeVar("R")

#: The message of the ``StoreUnavailable`` a closed handle raises.
CLOSED_MESSAGE: Final = "The store is closed"


class DriverErrors:
    """A context manager that turns the listed driver exceptions into
    :class:`~mcp_tasks.domain.errors.StoreUnavailable` (the driver's error as its cause).

    ``errors`` are the exception types that count as "unavailable" for this backend;
    ``excluding`` are subtypes of them that do not (say, the server answered with a
    refusal the caller reads itself). An
    :class:`~mcp_tasks.domain.errors.MCPTasksError` and every exception of another type
    leave the block unchanged. Reusable and re-entrant (``with`` it as often as needed).
    """

    __slots__ = ("errors", "excluding")

    def __init__(
        self, *errors: type[BaseException], excluding: tuple[type[BaseException], ...] = ()
    ) -> None:
        if not errors:
            raise ValueError("DriverErrors needs at least one exception type")
        self.errors: tuple[type[BaseException], ...] = errors
        self.excluding: tuple[type[BaseException], ...] = (MCPTasksError, *excluding)

    def __repr__(self) -> str:
        names = ", ".join(kind.__qualname__ for kind in self.errors)
        others = ", ".join(kind.__qualname__ for kind in self.excluding[1:])
        return f"DriverErrors({names}" + (f", excluding=({others},))" if others else ")")

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None or isinstance(error, self.excluding) or not isinstance(error, self.errors):
            return
        raise StoreUnavailable from error


class CloseGuard:
    """A handle's closed state (``S-CLOSE``): :meth:`check` at the start of every
    operation raises ``StoreUnavailable`` (:data:`CLOSED_MESSAGE`) once :meth:`close` ran."""

    __slots__ = ("_closed",)

    def __init__(self) -> None:
        self._closed = False

    def __repr__(self) -> str:
        return f"CloseGuard(closed={self._closed})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._closed

    def close(self) -> bool:
        """Mark the handle closed; whether it was open until now (so that a store's
        ``close`` releases its resources once and is idempotent)."""
        was_open, self._closed = not self._closed, True
        return was_open

    def check(self) -> None:
        """Raises:
        StoreUnavailable: the handle is closed."""
        if self._closed:
            raise StoreUnavailable(CLOSED_MESSAGE)


class _Request:
    """The request a task serves: the task, when its store work began
    (``anyio.current_time()``), and its deadline once a store operation named its bound."""

    __slots__ = ("deadline", "started", "task")

    def __init__(self, task: asyncio.Task[Any] | None, started: float) -> None:
        self.task, self.started = task, started
        self.deadline: float | None = None


_request: ContextVar[_Request | None] = ContextVar("mcp_tasks_request", default=None)


def _served() -> _Request | None:
    """The request the current task serves, if any (a task started from inside one
    inherits its context, but is no part of it)."""
    request = _request.get()
    # asyncio's own (a tenth of anyio.get_current_task()'s cost): this runs on every store
    # operation of a request, and the drivers run on asyncio.
    if request is None or request.task is not asyncio.current_task():
        return None
    return request


@contextmanager
def request_bound() -> Iterator[None]:
    """One request's store work: inside, every :func:`within` of the current task ends by
    its bound counted from entering here (the outermost entry, when nested).

    Only the current task: a task started from inside (a task body's run, which the
    request hands to the runner) inherits the context but is no part of the request, and
    its store operations keep their own bound each."""
    if _served() is not None:
        yield
        return
    token = _request.set(_Request(asyncio.current_task(), anyio.current_time()))
    try:
        yield
    finally:
        _request.reset(token)


def rest_of_request() -> anyio.CancelScope:
    """A cancel scope that ends at the deadline of the request the current task serves,
    once one of its store operations set it (else never): for what the request does
    besides the store's own operations (a change signal), which must not outlast it."""
    request = _served()
    deadline = math.inf if request is None or request.deadline is None else request.deadline
    return anyio.CancelScope(deadline=deadline)


def _deadline(timeout_ms: int) -> float:
    """When an operation that starts now must end (``anyio.current_time()``): in
    ``timeout_ms``, or ``timeout_ms`` after its request began."""
    request = _served()
    if request is None:
        return anyio.current_time() + timeout_ms / 1000
    request.deadline = request.started + timeout_ms / 1000
    return request.deadline


def within(timeout_ms: int) -> _Bound:
    """An overall bound on one store operation: past ``timeout_ms`` (counted from the
    request's start inside :func:`request_bound`) it is cancelled and raises
    ``StoreUnavailable`` (a timeout the driver raises inside becomes one too). Entered with
    no time left, it raises at once. ``with within(ms) as left_s:`` gives the seconds left,
    for a driver deadline of its own.

    For where a driver has no overall bound of its own; a backend sets the driver's
    timeouts from the same value, so that the driver usually answers first."""
    return _Bound(timeout_ms)


class _Bound:
    """:func:`within`'s context manager: ``anyio.fail_after``'s cancel scope, entered and
    left by hand. A plain class because it wraps every store operation: ``fail_after``'s
    generator layers cost as much again as the scope itself."""

    __slots__ = ("_scope", "_timeout_ms")

    def __init__(self, timeout_ms: int) -> None:
        self._timeout_ms = timeout_ms
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> float:
        deadline = _deadline(self._timeout_ms)
        left_s = deadline - anyio.current_time()
        if left_s <= 0:
            raise self._unavailable() from TimeoutError()
        scope = anyio.CancelScope(deadline=deadline)
        scope.__enter__()
        self._scope = scope
        return left_s

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        scope = self._scope
        assert scope is not None  # entered
        if scope.__exit__(kind, error, traceback):
            # The scope swallowed its own cancellation: nothing but its deadline cancels
            # it, so this is the timeout.
            raise self._unavailable() from TimeoutError()
        if kind is not None and issubclass(kind, TimeoutError):
            raise self._unavailable() from error

    def _unavailable(self) -> StoreUnavailable:
        return StoreUnavailable(f"The store did not answer within {self._timeout_ms} ms")


async def detached(
    call: Coroutine[Any, Any, R],
    *,
    gone: asyncio.Future[BaseException] | None = None,
    abandoned: Callable[[R], object] | None = None,
) -> R:
    """``call``'s outcome, run in a task of its own that no cancellation reaches: a caller
    cancelled meanwhile (its bound, its request's end) stops waiting at once, and ``call``
    runs on to its own end (a driver deadline of its own), its outcome dropped.

    ``gone``: a future the driver's own news completes, with its error, once the server is
    known to be gone (its connections refused) while the driver would wait on for it; the
    caller then stops waiting too and raises ``StoreUnavailable`` from that error, unless
    ``call`` ended first.

    ``abandoned``: what to do with a result that nobody waits for any more (a connection
    the caller stopped waiting for: close it, or keep it for the next caller).

    For a driver call that must not be cancelled (PyMongo's waits; asyncpg's connects,
    whose SSL probe fails unread when cancelled just after the TCP connect), or whose own
    shield would leave a failure nobody reads (asyncpg's ``Pool.release``: a cancelled
    caller's shield forgets the release, whose failure is then logged as never retrieved).
    asyncio's, as the drivers that need it are."""
    task = detach(call)
    try:
        if gone is None:
            return await asyncio.shield(task)
        # Cancelling asyncio.wait stops the wait only: neither future is cancelled.
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise StoreUnavailable from gone.result()
    except BaseException:
        if abandoned is not None:
            task.add_done_callback(partial(_hand_over, abandoned))
        raise


def detach(call: Coroutine[Any, Any, R]) -> asyncio.Future[R]:
    """``call`` run in a task of its own that nobody needs to wait for: kept until it
    ends, its failure then marked as seen."""
    task = asyncio.ensure_future(call)  # the context goes with it (a driver's deadline)
    _DETACHED.add(task)  # asyncio keeps only a weak reference to a task
    task.add_done_callback(_drop_outcome)
    return task


#: The detached calls still running.
_DETACHED: set[asyncio.Future[Any]] = set()


def _drop_outcome(task: asyncio.Future[Any]) -> None:
    """Forget a detached call, its failure marked as seen: nobody may be waiting for it."""
    _DETACHED.discard(task)
    if not task.cancelled():
        task.exception()


def _hand_over(abandoned: Callable[[R], object], task: asyncio.Future[R]) -> None:
    """A detached call's result, nobody waiting for it, to ``abandoned``."""
    if not task.cancelled() and task.exception() is None:
        abandoned(task.result())

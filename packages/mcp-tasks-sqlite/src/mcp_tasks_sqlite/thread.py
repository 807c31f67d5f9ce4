"""One sqlite3 connection and the one thread that uses it: a whole call is one hop, and
write transactions that queue up commit together.

sqlite3 blocks, so the store runs it off the event loop. A driver that hops to its thread
once per statement (aiosqlite) makes a read-modify-write transaction four hops (BEGIN, the
read, the compare-and-set, COMMIT), and each hop costs two wake-ups of the loop. Here the
store hands the thread the whole transaction as one function instead.

Group commit: with ``synchronous=FULL`` every COMMIT waits for the disk, and the writes of
one process take turns on one connection, so under a burst (fifty creates at once) each
write waited for every fsync before it. When the thread finds several write transactions
queued, it runs them in one transaction, each inside a savepoint of its own, and commits
once: a write that raises is rolled back to its savepoint alone, as it would have been
alone; every caller hears its outcome only after the COMMIT, so nothing is acknowledged
before it is durable. If the transaction itself is lost (the COMMIT fails, or a driver
error ends it), every write of the group gets that error and none of them is applied.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from asyncio import Future
from contextlib import suppress
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

R = TypeVar("R")

#: The most write transactions one COMMIT takes.
MAX_GROUP = 64


class _Job(NamedTuple):
    """A queued call and the future that gets its outcome; a call of ``None`` ends the
    thread. ``transaction``: run ``call`` in a write transaction (``BEGIN IMMEDIATE``)."""

    future: Future[Any] | None
    call: Callable[[sqlite3.Connection], Any] | None
    transaction: bool = False


class ConnectionThread:
    """Runs calls on one sqlite3 connection in a thread of its own, one at a time, in the
    order they were made (write transactions queued together share one COMMIT).

    The connection is opened (by ``connect``, on the thread) for the first call, and again
    for a later one when opening failed; that call answers the failure. A caller cancelled
    while its call is queued or running stops waiting, not the call: it runs to its end on
    the thread, so a transaction it opens it also commits or rolls back.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], *, name: str) -> None:
        self._jobs: SimpleQueue[_Job] = SimpleQueue()
        self._stopped = False
        thread = threading.Thread(target=_serve, args=(self._jobs, connect), name=name)
        # daemon: a store never closed must not keep the process alive at exit.
        thread.daemon = True
        thread.start()
        # Collected without stop(): end the thread (and close the connection) all the same.
        self._finalizer = weakref.finalize(self, self._jobs.put, _Job(None, None))

    async def run(self, call: Callable[[sqlite3.Connection], R]) -> R:
        """``call(connection)`` on the thread: its result, or what it raised."""
        return await self._submit(call, transaction=False)

    async def transact(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """``work(connection)`` in a write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``,
        rolled back if it raises), perhaps shared with other writes queued beside it: its
        result once committed, or what it raised (a driver error: nothing of it applied)."""
        return await self._submit(work, transaction=True)

    async def _submit(self, call: Callable[[sqlite3.Connection], R], *, transaction: bool) -> R:
        if self._stopped:
            raise RuntimeError("the connection thread is stopped")
        future: Future[R] = asyncio.get_running_loop().create_future()
        self._jobs.put(_Job(future, call, transaction))
        return await future

    async def stop(self) -> None:
        """Let the calls already queued run, close the connection and end the thread.
        Idempotent; :meth:`run` refuses afterwards."""
        if self._stopped:
            return
        self._stopped = True
        self._finalizer.detach()
        future: Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put(_Job(future, None))
        await future


def _serve(jobs: SimpleQueue[_Job], connect: Callable[[], sqlite3.Connection]) -> None:
    connection: sqlite3.Connection | None = None
    held: _Job | None = None  # taken from the queue while grouping, not yet run
    while True:
        job, held = (held, None) if held is not None else (jobs.get(), None)
        if job.call is None:
            try:
                if connection is not None:
                    connection.close()
            except BaseException as exc:
                _hand_back(job.future, None, exc)
            else:
                _hand_back(job.future, None, None)
            return
        try:
            if connection is None:
                connection = connect()
        except BaseException as exc:
            _hand_back(job.future, None, exc)
            continue
        if not job.transaction:
            _run_alone(connection, job)
            continue
        group = [job]
        while len(group) < MAX_GROUP:
            try:
                following = jobs.get_nowait()
            except Empty:
                break
            if not following.transaction or following.call is None:
                held = following  # runs next, after this group: the order is kept
                break
            group.append(following)
        if len(group) == 1:
            _run_alone(connection, job)
        else:
            _run_group(connection, group)


def _run_alone(connection: sqlite3.Connection, job: _Job) -> None:
    call = job.call
    assert call is not None
    try:
        result = _in_transaction(call, connection) if job.transaction else call(connection)
    except BaseException as exc:
        _hand_back(job.future, None, exc)
    else:
        _hand_back(job.future, result, None)


def _in_transaction(work: Callable[[sqlite3.Connection], R], conn: sqlite3.Connection) -> R:
    """``work`` in ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back if anything raises.

    IMMEDIATE takes the write lock before the first read (waiting up to the busy timeout
    for it); a deferred transaction that reads then writes fails with SQLITE_BUSY under
    concurrency, whatever the busy timeout."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    return result


def _run_group(connection: sqlite3.Connection, group: list[_Job]) -> None:
    """Every job of ``group`` in one transaction, each in a savepoint; one COMMIT."""
    outcomes: list[tuple[Any, BaseException | None]] = []
    try:
        connection.execute("BEGIN IMMEDIATE")
        for job in group:
            assert job.call is not None
            connection.execute("SAVEPOINT job")
            try:
                result = job.call(connection)
            except BaseException as exc:
                if not connection.in_transaction:  # SQLite ended the whole transaction
                    raise
                connection.execute("ROLLBACK TO job")
                connection.execute("RELEASE job")
                outcomes.append((None, exc))
            else:
                connection.execute("RELEASE job")
                outcomes.append((result, None))
        connection.execute("COMMIT")
    except BaseException as lost:  # nothing of the group is applied: each hears why
        with suppress(BaseException):
            connection.rollback()
        for job in group:
            _hand_back(job.future, None, lost)
        return
    for job, (result, error) in zip(group, outcomes, strict=True):
        _hand_back(job.future, result, error)


def _hand_back(future: Future[Any] | None, result: Any, error: BaseException | None) -> None:
    if future is None:
        return
    with suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
        future.get_loop().call_soon_threadsafe(_settle, future, result, error)


def _settle(future: Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)

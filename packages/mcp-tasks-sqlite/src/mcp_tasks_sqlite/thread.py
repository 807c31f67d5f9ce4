"""One sqlite3 connection and the one thread that uses it: a whole call is one hop.

sqlite3 blocks, so the store runs it off the event loop. A driver that hops to its thread
once per statement (aiosqlite) makes a read-modify-write transaction four hops (BEGIN, the
read, the compare-and-set, COMMIT), and each hop costs two wake-ups of the loop. Here the
store hands the thread the whole transaction as one function instead.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from asyncio import Future
from contextlib import suppress
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

R = TypeVar("R")

#: A queued call and the future that gets its outcome; a call of ``None`` ends the thread.
_Job = tuple["Future[Any] | None", "Callable[[sqlite3.Connection], Any] | None"]


class ConnectionThread:
    """Runs calls on one sqlite3 connection in a thread of its own, one at a time, in the
    order they were made.

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
        self._finalizer = weakref.finalize(self, self._jobs.put, (None, None))

    async def run(self, call: Callable[[sqlite3.Connection], R]) -> R:
        """``call(connection)`` on the thread: its result, or what it raised."""
        if self._stopped:
            raise RuntimeError("the connection thread is stopped")
        future: Future[R] = asyncio.get_running_loop().create_future()
        self._jobs.put((future, call))
        return await future

    async def stop(self) -> None:
        """Let the calls already queued run, close the connection and end the thread.
        Idempotent; :meth:`run` refuses afterwards."""
        if self._stopped:
            return
        self._stopped = True
        self._finalizer.detach()
        future: Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put((future, None))
        await future


def _serve(jobs: SimpleQueue[_Job], connect: Callable[[], sqlite3.Connection]) -> None:
    connection: sqlite3.Connection | None = None
    while True:
        future, call = jobs.get()
        try:
            if call is None:
                if connection is not None:
                    connection.close()
                _hand_back(future, None, None)
                return
            if connection is None:
                connection = connect()
            result = call(connection)
        except BaseException as exc:
            _hand_back(future, None, exc)
            if call is None:
                return
        else:
            _hand_back(future, result, None)


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

"""Task-changed signals between processes on one Postgres schema: ``LISTEN/NOTIFY``.

One channel per schema (``mcp_tasks_<schema>``). A signal is a digest of the task id
(:func:`mcp_tasks.runtime.notifier.signal_key`), sent after the store's write committed,
so a process woken by it reads the new state. One dedicated connection listens; sends go
through a second one (a listening connection must stay free to receive). A signal this
relay sent comes back to its own listener too; it is dropped there (Postgres names the
sending backend), since the notifier woke its own subscribers as it sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import anyio
import asyncpg

from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.runtime.notifier import RelayNotifier
from mcp_tasks.stores.kit import detached
from mcp_tasks_postgres.asyncpg_quirks import quiet_outage_noise

if TYPE_CHECKING:
    from collections.abc import Callable


logger = logging.getLogger(__name__)

#: How often the listening connection is checked (a dropped connection raises here).
#: The relay's bound when it is built without a store's (``StoreOptions.timeout_ms``).
DEFAULT_TIMEOUT_S = StoreOptions().timeout_ms / 1000
HEALTH_CHECK_S = 5.0


def channel_of(schema: str) -> str:
    """The NOTIFY channel of ``schema`` (an identifier: schemas are ``[a-z_][a-z0-9_]*``)."""
    return f"mcp_tasks_{schema}"[:63]


class PostgresRelay:
    """Carries signal keys between processes sharing one Postgres schema."""

    #: A listening connection is sent every NOTIFY committed after its LISTEN, and a
    #: dropped one raises (at the latest at the next health check): none is lost unsaid.
    complete = True

    def __init__(
        self, connect_url: str, schema: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._connect_url = connect_url
        self._timeout_s = timeout_s  # the store's bound, on connecting and on each send
        self.channel = channel_of(schema)
        self._sender: asyncpg.Connection | None = None
        self._send_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresRelay(channel={self.channel!r})"

    async def _connect(self) -> asyncpg.Connection:
        # Detached, as the store's connects are: asyncpg cancelled just after its TCP
        # connect leaves its SSL probe's failure unread. A connection that arrives after
        # the caller left is closed.
        quiet_outage_noise(asyncio.get_running_loop())
        connection: asyncpg.Connection = await detached(
            asyncpg.connect(
                self._connect_url,
                server_settings={"application_name": "mcp-tasks-notify"},
                timeout=self._timeout_s,
            ),
            abandoned=asyncpg.Connection.terminate,
        )
        return connection

    async def _sending_connection(self) -> asyncpg.Connection:
        if self._sender is None or self._sender.is_closed():
            self._sender = await self._connect()
        return self._sender

    async def send(self, key: str) -> None:
        async with self._send_lock:
            sender = await self._sending_connection()
            try:
                await sender.execute(
                    "SELECT pg_notify($1, $2)", self.channel, key, timeout=self._timeout_s
                )
            except (asyncpg.PostgresError, OSError):
                await self._drop_sender()
                raise

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        connection = await self._connect()
        lost = anyio.Event()

        def on_notify(_conn: Any, pid: int, _channel: str, payload: object) -> None:
            sender = self._sender
            if sender is not None and pid == sender.get_server_pid():
                return  # this relay's own send: its notifier woke its subscribers already
            deliver(str(payload))

        connection.add_termination_listener(lambda _conn: lost.set())
        try:
            await connection.add_listener(self.channel, on_notify)
            async with self._send_lock:  # connected now, not on the first change
                await self._sending_connection()
            ready()
            while not lost.is_set():
                with anyio.move_on_after(HEALTH_CHECK_S):
                    await lost.wait()
                if not lost.is_set():
                    await connection.execute("SELECT 1")
            raise ConnectionError("the LISTEN connection was closed")
        finally:
            with anyio.CancelScope(shield=True):
                await _close(connection)

    async def _drop_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await _close(sender)

    async def aclose(self) -> None:
        async with self._send_lock:
            await self._drop_sender()


async def _close(connection: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(connection.close(), timeout=5)
    except Exception:
        connection.terminate()


def relay_notifier(connect_url: str, schema: str, *, timeout_s: float) -> RelayNotifier:
    """LISTEN/NOTIFY on the database at ``connect_url``, for ``schema`` (what the Postgres
    store offers as its notifier)."""
    return RelayNotifier(PostgresRelay(connect_url, schema, timeout_s=timeout_s))

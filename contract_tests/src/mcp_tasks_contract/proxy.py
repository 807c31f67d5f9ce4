"""A TCP proxy in front of a store's server that a test takes away and brings back: a store
outage on the shared servers, without stopping them (other tests use them too).

Three kinds of outage (:meth:`StoppableProxy.stop`): ``"refused"``, the port closed and
every connection cut, as when the server's process is killed; ``"silent"``, connections
accepted and held with nothing forwarded either way, as when the server hangs or the
network drops every packet; ``"slow"``, every answer of the server passed on ``delay_s``
late, as from a server overloaded or far away (each round trip takes that long).
:meth:`StoppableProxy.resume` brings the server back: on the same port, every connection
of the outage closed (the drivers connect again). :meth:`StoppableProxy.cut_idle` closes
the connections that carried nothing for a while, the server never away, as a firewall, a
NAT, a load balancer or the server's own idle timeout does.

:meth:`StoppableProxy.to` makes one for a store's URL (a Postgres server reached over its
Unix socket, as the embedded test server is, included); :func:`through` is the URL by way of
it.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = ["Outage", "StoppableProxy", "through"]

Outage = Literal["refused", "silent", "slow"]


#: The port a store URL without one names, by scheme.
_DEFAULT_PORTS = {"postgresql": 5432, "postgres": 5432, "redis": 6379, "mongodb": 27017}


class StoppableProxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port`` (or to the Unix socket ``unix_path``)
    until :meth:`stop`; ``async with`` it."""

    def __init__(self, host: str, port: int, *, unix_path: str | None = None) -> None:
        self.host, self.upstream_port, self.unix_path = host, port, unix_path
        self.port = 0  # picked at the first start, kept afterwards
        self.outage: Outage | None = None
        self.delay_s = 0.0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        #: Each client connection's two ends, and when it last carried bytes either way.
        self._carried: dict[asyncio.StreamWriter, tuple[asyncio.StreamWriter, float]] = {}
        self._flowing = asyncio.Event()
        self._flowing.set()

    @classmethod
    def to(cls, url: str) -> StoppableProxy:
        """A proxy to the server of the store URL ``url``: its host and port, or the Unix
        socket a Postgres URL names in ``?host=/directory``."""
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.split("+")[0], 0)
        socket_dir = dict(parse_qsl(parts.query)).get("host", "")
        if not parts.hostname and socket_dir.startswith("/"):
            return cls("", port, unix_path=f"{socket_dir}/.s.PGSQL.{port}")
        return cls(parts.hostname or "127.0.0.1", port)

    async def __aenter__(self) -> StoppableProxy:
        await self._listen()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._cut()
        await self._close_listener()

    async def stop(self, outage: Outage, *, delay_s: float = 1.0) -> None:
        """Take the server away, as ``outage`` says (``"slow"``: by ``delay_s`` a round trip)."""
        self.outage = outage
        if outage == "refused":
            await self._close_listener()
            self._cut()
        elif outage == "silent":
            self._flowing.clear()
        else:
            self.delay_s = delay_s

    async def resume(self) -> None:
        """Bring the server back; the connections of the outage are closed."""
        self.outage = None
        self.delay_s = 0.0
        self._cut()
        self._flowing.set()
        if self._server is None:
            await self._listen()

    def cut_idle(self, idle_s: float) -> int:
        """Close every connection that carried nothing either way for ``idle_s`` or more
        (both its ends); how many. New connections are forwarded as before."""
        now = asyncio.get_running_loop().time()
        idle = [w for w, (_, last) in self._carried.items() if now - last >= idle_s]
        for writer in idle:
            self._close(writer, self._carried[writer][0])
        return len(idle)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    def _cut(self) -> None:
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()
        self._carried.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._flowing.wait()  # silent: held, never answered
            if self.unix_path is not None:
                up_reader, up_writer = await asyncio.open_unix_connection(self.unix_path)
            else:
                up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        self._carried[writer] = (up_writer, asyncio.get_running_loop().time())
        await asyncio.gather(
            self._pipe(reader, up_writer, carrier=writer),
            self._pipe(up_reader, writer, carrier=writer, answers=True),
            return_exceptions=True,
        )
        self._close(writer, up_writer)

    def _close(self, writer: asyncio.StreamWriter, up_writer: asyncio.StreamWriter) -> None:
        """Close one connection: the client's end and the server's."""
        self._carried.pop(writer, None)
        for end in (writer, up_writer):
            end.transport.abort()
            self._writers.discard(end)

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        carrier: asyncio.StreamWriter,
        answers: bool = False,
    ) -> None:
        """Pass on what ``source`` sends; the server's ``answers`` each ``delay_s`` late, in
        order (a queue: several in flight at once are each late by ``delay_s``, not more)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            with suppress(ConnectionError, OSError):
                while data := (item := await queue.get())[1]:
                    await asyncio.sleep(max(0.0, item[0] - loop.time()))
                    await self._flowing.wait()  # silent: held, not passed on
                    if sink.transport.is_closing():
                        return
                    sink.write(data)
                    await sink.drain()

        delivering = asyncio.ensure_future(deliver())
        try:
            with suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    if carrier in self._carried:
                        self._carried[carrier] = (self._carried[carrier][0], loop.time())
                    queue.put_nowait((loop.time() + (self.delay_s if answers else 0.0), data))
            queue.put_nowait((0.0, b""))  # the end: what came before it is still passed on
            await delivering
        finally:
            delivering.cancel()
            sink.transport.abort()


def through(url: str, proxy: StoppableProxy) -> str:
    """``url`` (a Postgres, Redis or MongoDB URL) by way of ``proxy``; a MongoDB URL also
    connects directly (a replica set's members name their own addresses, not the proxy's)."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    address = f"127.0.0.1:{proxy.port}"
    parts = parts._replace(netloc=f"{userinfo}@{address}" if userinfo else address)
    if proxy.unix_path is not None:  # the proxy's TCP port, not the socket the URL named
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "host"]
        parts = parts._replace(query=urlencode(query))
    if parts.scheme.startswith("mongodb"):
        query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "replicaset"]
        parts = parts._replace(query=urlencode([*query, ("directConnection", "true")]))
    return parts.geturl()

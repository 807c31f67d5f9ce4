"""A store on another host, on this machine: the servers run in a network namespace of
their own, joined to the root namespace by a veth pair, and reach the shared Postgres and
Redis (which listen on 127.0.0.1 only) through TCP forwarders this process runs on the
veth's host-side address, which hold every chunk :data:`DELAY_S` each way (a store a few
milliseconds away). Where the kernel has ``netem`` the veth itself delays every packet
too (``tc qdisc … netem delay``); kernels without the module (a Firecracker VM's) get the
forwarders' delay alone. The tests reach the servers over the veth. Needs root.

The bench (``bench/remote_store.py``) loads this file by its path for :func:`remote_host`
and :func:`forwarded` (with its own delay, and ``heard`` to count the exchanges on the
wire): nothing above the fixtures imports the tests' conftest."""

from __future__ import annotations

import os
import secrets
import subprocess
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
import pytest

from mcp_tasks.stores.location import with_query

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from types import ModuleType

    from conftest import Processes

#: The delay each way: a store a few milliseconds away.
DELAY_S = 0.003


@dataclass(frozen=True)
class RemoteHost:
    """A network namespace (``name``) at ``address``, this namespace at ``gateway``."""

    name: str
    address: str
    gateway: str

    def command(self) -> list[str]:
        """The prefix that runs a command inside the namespace (same process: ``ip netns
        exec`` execs it)."""
        return ["ip", "netns", "exec", self.name]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("network namespaces need root, which CI has")
        pytest.skip("network namespaces need root (ip netns)")


@contextmanager
def remote_host(delay_s: float = DELAY_S) -> Iterator[RemoteHost]:
    """A fresh namespace and veth pair (names unique per call, a /30 of 10.213.0.0/16
    nobody on this machine uses), each end delaying its packets ``delay_s``, removed at
    the end whatever happened."""
    token = secrets.token_hex(3)
    name, outside, inside = f"mtnet-{token}", f"mt{token}h", f"mt{token}n"
    used = subprocess.run(["ip", "-o", "addr"], check=True, capture_output=True, text=True).stdout
    while True:
        third, fourth = secrets.randbelow(256), 4 * secrets.randbelow(64)
        gateway, address = f"10.213.{third}.{fourth + 1}", f"10.213.{third}.{fourth + 2}"
        if f"10.213.{third}.{fourth}" not in used and gateway not in used:
            break
    try:
        _ip("netns", "add", name)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", name)
        _ip("addr", "add", f"{gateway}/30", "dev", outside)
        _ip("link", "set", outside, "up")
        for args in (
            ["addr", "add", f"{address}/30", "dev", inside],
            ["link", "set", inside, "up"],
            ["link", "set", "lo", "up"],
        ):
            _ip("netns", "exec", name, "ip", *args)
        for prefix, device in (([], outside), (["ip", "netns", "exec", name], inside)):
            delay = f"{delay_s * 1000:g}ms"
            # check=False: no netem in this kernel leaves the forwarders' delay alone.
            subprocess.run(
                [*prefix, "tc", "qdisc", "add", "dev", device, "root", "netem", "delay", delay],
                check=False,
                capture_output=True,
            )
        yield RemoteHost(name, address, gateway)
    finally:
        # Deleting the namespace deletes its end of the pair, and with it the other end.
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", outside], check=False, capture_output=True)


@asynccontextmanager
async def forwarded(
    url: str,
    host: RemoteHost,
    *,
    delay_s: float = DELAY_S,
    heard: Callable[[int, bool], None] | None = None,
) -> AsyncIterator[str]:
    """``url`` (a server on this machine) as the namespace reaches it: through a TCP
    forwarder on ``host.gateway`` that this process runs while the block lasts, holding
    each chunk ``delay_s``. ``heard(connection, upstream)`` is told of each chunk read
    (``connection`` numbers the forwarded connections; ``upstream``: towards the server)."""
    parts = urlsplit(url)
    target_host, target_port = parts.hostname or "127.0.0.1", parts.port
    assert target_port is not None, url
    listener = await anyio.create_tcp_listener(local_host=host.gateway, local_port=0)

    connections = iter(range(1 << 62))

    async def pipe(
        source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream, connection: int, upstream: bool
    ) -> None:
        """Each chunk reaches ``sink`` delay_s after it left ``source``, in order; chunks
        in flight overlap, as on a link (a delay per chunk would also cap the rate)."""
        send, receive = anyio.create_memory_object_stream[tuple[float, bytes]](1000)

        async def read() -> None:
            async with send:
                async for chunk in source:
                    if heard is not None:
                        heard(connection, upstream)
                    await send.send((anyio.current_time() + delay_s, chunk))

        async def write() -> None:
            async with receive:
                async for due, chunk in receive:
                    await anyio.sleep(max(0.0, due - anyio.current_time()))
                    await sink.send(chunk)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                tg.start_soon(write)
        except* (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await sink.aclose()

    async def serve(client: anyio.abc.SocketStream) -> None:
        try:
            upstream = await anyio.connect_tcp(target_host, target_port)
        except OSError:
            await client.aclose()
            return
        connection = next(connections)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pipe, client, upstream, connection, True)
            tg.start_soon(pipe, upstream, client, connection, False)

    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    netloc = parts.netloc.rsplit("@", 1)
    where = f"{host.gateway}:{port}"
    rewritten = urlunsplit(
        parts._replace(netloc=f"{netloc[0]}@{where}" if len(netloc) == 2 else where)
    )
    if parts.scheme == "mongodb":
        # a replica set's client goes to the addresses its members announce (this
        # machine's own, not the forwarder's): a direct connection to the one given
        rewritten = with_query(rewritten, replicaSet=None, directConnection="true")
    # The listener is closed once its task has ended, not under its accept().
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield rewritten
        finally:
            tg.cancel_scope.cancel()


# The fixtures of test_remote_*.py (imported there).


def _conftest(config: pytest.Config) -> ModuleType:
    """The conftest beside this file, as pytest loaded it: ``from conftest import …`` at
    a fixture's run names whichever package's conftest was imported last (tests of
    several packages share a worker process)."""
    mine = Path(__file__).with_name("conftest.py")
    for plugin in config.pluginmanager.get_plugins():
        found = getattr(plugin, "__file__", None)
        if found is not None and Path(found) == mine:
            return plugin  # type: ignore[no-any-return]
    raise LookupError(f"{mine} is not loaded: run these fixtures under pytest")


@pytest.fixture
def remote() -> Iterator[RemoteHost]:
    require_root()
    with remote_host() as host:
        yield host


@pytest.fixture(params=["postgres", "redis"])
async def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, remote: RemoteHost
) -> AsyncIterator[str]:
    """A fresh namespace of the shared Postgres or Redis, as the namespace reaches it."""
    async with (
        _conftest(request.config).durable_url(request, tmp_path) as url,
        forwarded(url, remote) as far,
    ):
        yield far


@pytest.fixture
async def processes(
    request: pytest.FixtureRequest, store_url: str, tmp_path: Path, remote: RemoteHost
) -> AsyncIterator[Processes]:
    """Processes in the namespace, bound to its address."""
    processes_of = _conftest(request.config).processes_of

    async with processes_of(store_url, tmp_path / "crash.log") as started:
        started.prefix = remote.command()
        started.host = remote.address
        started.apps = {"crash_app:mcp": "crash_app:anywhere"}
        yield started

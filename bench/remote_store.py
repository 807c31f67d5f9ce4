"""The store on another host: round trips per store operation.

A process in a network namespace of its own (``ip netns``, a veth pair, addresses on this
machine only; the tests' ``remote_host.py`` sets it up and tears it down) runs each store
operation ``calls`` times, one at a time, on Postgres or Redis reached through a TCP
forwarder in this process (the tests' ``forwarded``) over a link that delays every packet
:data:`DELAY_S` each way (``tc qdisc … netem delay``: a round trip of 2 ms). The forwarder
counts the exchanges on the wire: a round trip is a run of bytes towards the server after
bytes came back (or first), per connection. Per operation: the round trips per call
(counted), the mean latency there and on this machine without the link, and the
latency's growth over the link's round trip (a second estimate of the same count). Goal:
one round trip per operation where the backend allows it (``EXCEPTIONS`` names the others).

    ip netns exec NS python -m bench.remote_store child URL CALLS   # the process inside
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import time
from contextlib import AsyncExitStack, ExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.streams.buffered

from bench.common import ROOT, find_backends
from bench.run import goal
from bench.scale import claimer
from bench.stores import new_task
from mcp_tasks import ANY_OWNER, Complete, StoreOptions, store_from_url
from mcp_tasks.stores.abilities import CountsReader, StatsReader

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from mcp_tasks import Claimed

#: The delay of each way of the link (netem on both ends of the veth pair).
DELAY_S = 0.001
#: The operations, in the order the child runs them.
OPERATIONS = (
    "create",
    "get",
    "claim",
    "renew",
    "complete",
    "put_status",
    "reap",
    "stats",
    "counts",
)
#: The stores measured (the servers the tests' helper forwards to; a SQLite file is on the
#: host's own disk).
STORES = ("postgres", "redis", "mongodb")
#: Why an operation takes more than one round trip on a store, by ``store.op``: the
#: exceptions the goal names.
_READ_DECIDE_WRITE = (
    "2 by design: the core's rules decide the change in Python (one place for every"
    " backend), so the SQL store reads the row and the server's clock, then writes it with"
    " a compare-and-set on its version (no lock held across the round trip)"
)
EXCEPTIONS: dict[str, str] = {
    "postgres.create": "2 by design: the server's clock is read for the core to build the"
    " record, then one statement bumps the row counter and inserts it (fast_create)",
    "postgres.renew": _READ_DECIDE_WRITE,
    "postgres.complete": _READ_DECIDE_WRITE,
    "postgres.put_status": _READ_DECIDE_WRITE,
    "postgres.claim": "4: a transaction (BEGIN; the oldest eligible row locked, SKIP"
    " LOCKED; the rules' claim written by compare-and-set; COMMIT), each a statement"
    " awaited in turn",
    "postgres.reap": "5: a transaction (BEGIN; the row counter locked; the delete; the"
    " counter lowered; COMMIT)",
    "postgres.get": "1, and once per connection and statement 1 more: asyncpg prepares a"
    " statement text the first time it runs it (its statement cache)",
    "postgres.stats": "1 (and asyncpg's first prepare, as get)",
    "postgres.counts": "1 (and asyncpg's first prepare, as get)",
    "mongodb.create": "2 by design: the server's clock is read for the core to build the"
    " record, then one insert (a row or per-owner cap adds the create lock's: the MongoDB"
    " package's README)",
    "mongodb.claim": "4: the server's clock; a read for waiting tasks whose time came"
    " (moved to the ready lane when one did); a page of the ready lane's ids in claim order;"
    " the claim, one update by _id guarded by the rules (one more per candidate another"
    " process took first)",
    "mongodb.complete": _READ_DECIDE_WRITE.replace("the SQL store", "the store")
    + "; the read is one aggregation that brings the document and the server's clock",
    "mongodb.put_status": _READ_DECIDE_WRITE.replace("the SQL store", "the store")
    + "; the read is one aggregation that brings the document and the server's clock",
    "mongodb.reap": "7: the server's clock; the due rows read by their index; a transaction"
    " that reads them again, deletes those still due, lowers the counters and commits; a"
    " read of the documents written since the last fold (folded when there are any)",
    "mongodb.stats": "16, most of them sent at once (the latency grows by about 9 round"
    " trips): the server's clock; the totals; the dirty and the expired documents; the"
    " leases, lapsed leases and retries of each live status, the recent claimable tasks,"
    " the expiry and the working minutes, together; the oldest working task's index"
    " probes; the totals again, to check no fold ran between",
    "mongodb.counts": "5: the server's clock; the totals; the dirty and the expired"
    " documents (two reads sent together); the totals again, to check that no fold or reap"
    " ran between the first read and the last",
}
HELPER = ROOT / "packages" / "mcp-tasks" / "tests" / "durable" / "remote_host.py"


def unavailable() -> str | None:
    """Why no namespace can be made here, or ``None``."""
    if os.geteuid() != 0:
        return "not available: network namespaces need root (ip netns)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"not available: no `{tool}` (Debian's iproute2)"
    return None


def helper() -> Any:
    """The tests' ``remote_host.py``, loaded from its file (it is no package's module)."""
    name = "mcp_tasks_bench_remote_host"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HELPER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass's module must be found while it is made
    spec.loader.exec_module(module)
    return module


# The process inside the namespace.


async def child(url: str, calls: int) -> None:
    """Each operation ``calls`` times, between a ``begin OP`` line and an ``end OP US`` line
    on stdout (``US``: the mean microseconds of a call); each waits for a line on stdin, so
    the parent reads its counters at the edges. Preparation runs outside the edges."""
    store = store_from_url(url, StoreOptions(max_rows=None, max_active_per_owner=None))
    try:
        plain = [replace(new_task(), owner="o") for _ in range(calls)]
        for task in plain:  # the connections open here, outside any measurement
            await store.create(task)
        expired = [new_task(ttl_ms=1) for _ in range(calls)]
        for task in expired:
            await store.create(task)
        claimed: list[Claimed] = []
        claim = claimer(store, claimed)

        steps: dict[str, Callable[[int], Awaitable[object]]] = {
            "create": lambda _: store.create(new_task(work=True)),
            "get": lambda i: store.get(plain[i].task_id, ANY_OWNER),
            "claim": claim,
            "renew": lambda i: store.renew(claimed[i].lease, lease_ms=600_000),
            "complete": lambda i: store.put_status(
                claimed[i].lease.task_id, Complete({"content": []}), lease=claimed[i].lease
            ),
            "put_status": lambda i: store.put_status(plain[i].task_id, Complete({"content": []})),
            "reap": lambda _: store.reap(limit=1),
        }
        if isinstance(store, StatsReader):
            steps["stats"] = lambda _: store.stats()
        if isinstance(store, CountsReader):
            steps["counts"] = lambda _: store.counts()
        for op in (op for op in OPERATIONS if op in steps):
            print(f"begin {op}", flush=True)
            sys.stdin.readline()
            started = time.perf_counter()
            for i in range(calls):
                await steps[op](i)
            mean_us = (time.perf_counter() - started) / calls * 1e6
            print(f"end {op} {mean_us:.1f}", flush=True)
            sys.stdin.readline()
    finally:
        await store.close()


# This process.


class Exchanges:
    """The round trips seen by a forwarder: per connection, each run of chunks towards the
    server that follows chunks back from it (or opens the connection) is one."""

    def __init__(self) -> None:
        self.total = 0
        self._last: dict[int, bool] = {}

    def heard(self, connection: int, upstream: bool) -> None:
        if upstream and self._last.get(connection) is not True:
            self.total += 1
        self._last[connection] = upstream


async def run_child(
    prefix: list[str], url: str, calls: int, exchanges: Exchanges | None
) -> dict[str, dict[str, float]]:
    """The child's figures per operation: mean µs and (with ``exchanges``) round trips per
    call."""
    argv = [*prefix, sys.executable, "-m", "bench.remote_store", "child", url, str(calls)]
    found: dict[str, dict[str, float]] = {}
    async with await anyio.open_process(argv, cwd=ROOT) as process:
        assert process.stdout is not None
        assert process.stdin is not None
        buffered = anyio.streams.buffered.BufferedByteReceiveStream(process.stdout)
        before = 0
        with anyio.fail_after(600):
            while True:
                try:
                    line = (await buffered.receive_until(b"\n", 4096)).decode().split()
                except (anyio.IncompleteRead, anyio.EndOfStream):
                    break
                if line[0] == "begin":
                    before = exchanges.total if exchanges else 0
                elif line[0] == "end":
                    figures = {"mean_us": float(line[2])}
                    if exchanges is not None:
                        figures["round_trips"] = (exchanges.total - before) / calls
                    found[line[1]] = figures
                await process.stdin.send(b"go\n")
        if await process.wait() != 0:
            stderr = b"" if process.stderr is None else await process.stderr.receive()
            raise RuntimeError(f"the child failed: {stderr.decode(errors='replace')}")
    return found


async def measure(name: str, url: str, calls: int, *, nearby: bool = True) -> dict[str, Any]:
    """One store's operations in the namespace behind the delayed link and (``nearby``)
    here, without it."""
    remote = helper()
    here = await run_child([], url, calls, None) if nearby else {}
    exchanges = Exchanges()
    async with AsyncExitStack() as stack:
        host = stack.enter_context(remote.remote_host(DELAY_S))
        # A kernel without netem (a Firecracker VM's) delays nothing on the veth: the
        # forwarder then holds each chunk DELAY_S each way instead, as the tests' does.
        link_s = await ping(host)
        netem = link_s > DELAY_S
        forwarder_s = 0.0 if netem else DELAY_S
        far = await stack.enter_async_context(
            remote.forwarded(url, host, delay_s=forwarder_s, heard=exchanges.heard)
        )
        there = await run_child(host.command(), far, calls, exchanges)
    rtt_s = link_s + 2 * forwarder_s
    ops = {}
    for op, figures in there.items():
        near = here.get(op, {}).get("mean_us")
        growth = None if near is None else (figures["mean_us"] - near) / (rtt_s * 1e6)
        ops[op] = {
            "round_trips": round(figures["round_trips"], 2),
            "round_trips_from_latency": None if growth is None else round(growth, 2),
            "remote_us": round(figures["mean_us"], 1),
            "local_us": near,
        }
        print(
            f"  {name:<9}{op:<11}{figures['round_trips']:>6.2f} round trips"
            f"  (from latency {growth or 0:.2f})  {figures['mean_us']:>8.0f} µs there,"
            f" {near or 0:>6.0f} µs here",
            flush=True,
        )
    delayed_by = "netem on the veth pair" if netem else "the forwarder (no netem in this kernel)"
    return {
        "rtt_ms": round(rtt_s * 1000, 3),
        "delayed_by": delayed_by,
        "calls": calls,
        "namespace": host.name,
        "operations": ops,
    }


async def ping(host: Any) -> float:
    """The link's round trip, measured: the median of 20 TCP connects from inside the
    namespace to a listener on its gateway (a connect is one round trip)."""
    listener = await anyio.create_tcp_listener(local_host=host.gateway, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    code = (
        "import socket, statistics, time\n"
        "took = []\n"
        "for _ in range(20):\n"
        "    start = time.perf_counter()\n"
        f"    socket.create_connection(({host.gateway!r}, {port})).close()\n"
        "    took.append(time.perf_counter() - start)\n"
        "print(statistics.median(took))\n"
    )

    async def accept(client: anyio.abc.SocketStream) -> None:
        await client.aclose()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, accept)
        done = await anyio.run_process([*host.command(), sys.executable, "-c", code])
        tg.cancel_scope.cancel()
    return float(done.stdout.decode())


def part(
    stack: ExitStack, directory: Path, *, quick: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The round trips of each operation on each of :data:`STORES` (``remote.*``)."""
    why = unavailable()
    found: dict[str, Any] = {"delay_each_way_ms": DELAY_S * 1000}
    ratios: dict[str, Any] = {}
    backends = find_backends(stack, directory, list(STORES))
    for name in STORES:
        backend = backends.get(name)
        missing = why or backends.missing.get(name) or (None if backend else "not available")
        if backend is None or missing is not None:
            found[name] = {"missing": missing}
            for op in OPERATIONS:
                ratios[f"remote.{name}.{op}_round_trips"] = goal((None, 1), "<=", 1, missing)
            continue
        print(f"4e. {name}: round trips per operation to a store 2 ms away", flush=True)
        found[name] = asyncio.run(measure(name, backend.url, 20 if quick else 50))
        for op, figures in found[name]["operations"].items():
            ratios[f"remote.{name}.{op}_round_trips"] = goal(
                (figures["round_trips"], 1), "<=", 1, EXCEPTIONS.get(f"{name}.{op}")
            )
    return found, ratios


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    asyncio.run(child(sys.argv[2], int(sys.argv[3])))

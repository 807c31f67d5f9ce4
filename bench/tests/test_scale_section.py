"""The scale section at a small size: section 4c (bench/scale.py) on every durable store (it
runs, and what each store counts stays exact as its table grows, through creates, bulk
copies, completes, claims, renews and reaps), the processes arrangement with workers
(bench/scale_processes.py), listen streams (bench/listen_streams.py) and the round trips to
a store on another host (bench/remote_store.py). The speed itself is measured by
``bench.scale_section``, never asserted here."""

from __future__ import annotations

import asyncio
import os
import subprocess
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

from bench import listen_streams, remote_store, scale, scale_processes
from bench.common import find_backends, namespace_factory

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

#: The two sizes, small enough for every run of the tests (the embedded MongoDB server, a
#: test server, writes slowly: smaller there). What is asserted holds at any size; the
#: speed at a real size is the bench's. On SQLite and Postgres each growth is more than
#: ``scale.TEMPLATES`` rows, so that it goes through the bulk copy, as the bench's does.
SIZES = {"sqlite": (200, 1_500), "postgres": (200, 1_500), "redis": (200, 800)}
SIZES["mongodb"] = (100, 300)
#: The stores that keep their counts as they write (``counts()``): every durable one.
COUNTING = {"sqlite", "postgres", "redis", "mongodb"}
#: The third size of the stores measured at 1 M rows in the bench (its seeding copies rows
#: inside the database on SQLite and Postgres: bench/bulk_seed.py).
HUGE = {"sqlite": 3_000, "postgres": 3_000, "redis": 1_600}
#: Calls of each operation at each size, and expired rows reaped beside the table.
OPS = 20
EXPIRED = 100


@pytest.mark.parametrize("name", sorted(SIZES))
def test_counts_and_stats_stay_exact_from_a_small_table_to_a_larger_one(
    name: str, tmp_path: Path
) -> None:
    """Tables seeded as a served store's is (80 % finished, 20 % queued with work, 2,000
    owners) to a small size and to larger ones (a third where the bench measures 1 M rows),
    with every operation run at each size in two rounds and ``EXPIRED`` rows reaped beside
    each table: ``stats()`` and, where the store keeps them, ``counts()`` give exactly the
    rows and the statuses the section wrote, and every operation has a figure at every
    size."""
    small, large = SIZES[name]
    huge = HUGE.get(name)
    with ExitStack() as stack:
        backends = find_backends(stack, tmp_path, [name])
        backend = backends.get(name)
        if backend is None:
            pytest.skip(backends.missing.get(name, f"{name} is not available"))
        result = asyncio.run(
            # No settling: what is asserted is exactness, which needs no wait.
            scale.section(
                namespace_factory(stack, tmp_path, backend),
                small,
                large,
                OPS,
                600,
                expired=EXPIRED,
                huge=huge,
                settle_s=0,
                rounds=2,
            )
        )
    counted = {"stats", "counts"} if name in COUNTING else {"stats"}
    for size in ("small", "large", *(("huge",) if huge else ())):
        check = result["exact"][size]
        assert check["exact"], check
        assert counted == check.keys() & {"stats", "counts"}
        ops = {op for op in scale.OPERATIONS if op != "counts" or name in COUNTING}
        assert set(result[size]) == {f"{op}_us" for op in ops}
    assert result["rows"]["large"] >= large
    if huge is not None:
        assert result["rows"]["huge"] >= huge


def test_one_serving_process_and_two_workers_complete_every_task(tmp_path: Path) -> None:
    """On a SQLite file, one ``mcp-tasks serve`` process that creates tasks and runs none
    beside two ``mcp-tasks worker``s: every task the workload creates completes (its
    client waits for each), and each of the three processes has a CPU figure."""
    with ExitStack() as stack:
        backend = find_backends(stack, tmp_path, ["sqlite"]).get("sqlite")
        assert backend is not None
        found = scale_processes.arrangement(backend, 1, 2, tasks=10, in_flight=5, poll_ms=20)
    assert found["tasks_per_s"] > 0
    assert len(found["cpu_ms_per_task_by_process"]) == 3


def test_a_cancel_reaches_its_listen_stream_among_a_hundred(tmp_path: Path) -> None:
    """One ``mcp-tasks serve`` process on a SQLite file holding 10 and then 100 open listen
    streams, one task each: every sampled task's cancel is delivered on its own stream
    (``measure`` raises otherwise), and the memory per stream has a figure."""
    with ExitStack() as stack:
        backend = find_backends(stack, tmp_path, ["sqlite"]).get("sqlite")
        assert backend is not None
        found = listen_streams.arrangement(backend, 1, quick=True)
    assert "failed" not in found, found.get("failed")
    assert found["streams_many"]["samples"] == 20
    assert "rss_bytes_per_stream" in found


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}


@pytest.mark.parametrize("name", remote_store.STORES)
def test_round_trips_are_counted_for_every_operation_of_a_store_on_another_host(
    name: str, tmp_path: Path
) -> None:
    """A process in a network namespace of its own runs each store operation through the
    counting forwarder: every operation has a count of at least one round trip per call,
    and the namespace is gone afterwards."""
    why = remote_store.unavailable()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    with ExitStack() as stack:
        backends = find_backends(stack, tmp_path, [name])
        backend = backends.get(name)
        if backend is None:
            reason = backends.missing.get(name, f"{name} is not available")
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        found = asyncio.run(remote_store.measure(name, backend.url, 3, nearby=False))
    expected = set(remote_store.OPERATIONS)
    assert set(found["operations"]) == expected
    assert all(op["round_trips"] >= 1 for op in found["operations"].values())
    assert found["namespace"] not in _namespaces()

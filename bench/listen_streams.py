"""Many open listen streams: the latency of a change's notification and the memory per stream.

On one store, ``mcp-tasks serve bench.serve_app:listening`` processes (its tasks wait for
workers, so no task body runs beside the streams): 1 process, then 4. ``streams`` tasks are
created and a ``subscriptions/listen`` stream is opened on each (one task per stream, the
streams spread evenly over the processes); then ``samples`` of those tasks, picked at
random, are cancelled one at a time through a process other than the one holding the
task's stream when there are several (the change crosses processes through the store's
notifier), each timed from the ``tasks/cancel`` sent until its stream delivers
``cancelled``. With 10 streams and with 1,000: p50 and p99 of that latency, and the
serving processes' resident memory per stream (RSS with 1,000 streams open less RSS with
10, over the 990 streams more). Goal: p99 with 1,000 streams ≤ twice p99 with 10.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from contextlib import AsyncExitStack, ExitStack
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from bench.common import find_backends, percentile, resident_bytes, serving
from bench.run import goal
from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from pathlib import Path

    from bench.common import Backend

STORES = ("postgres", "redis", "mongodb")
#: The processes and the stream counts measured.
PROCESSES = (1, 4)
FEW, MANY = 10, 1_000
#: Streams opened at once.
WAVE = 50


async def listening(
    client: RawClient, task_id: str, heard: dict[str, float], ready: asyncio.Event
) -> None:
    """A listen stream on ``task_id`` until it delivers ``cancelled`` (its time: ``heard``)."""
    params = {"notifications": {"taskIds": [task_id]}}
    async with client.stream("subscriptions/listen", params) as stream:
        seen = []
        while (message := await stream.next()) is not None:
            seen.append(message)
            if message.get("method") == "notifications/tasks":
                ready.set()  # the task's status as it is: the stream is subscribed
            if message.get("params", {}).get("status") == "cancelled":
                heard[task_id] = time.perf_counter()
                return
        raise RuntimeError(f"the listen stream on a task ended after {seen}")


async def measure(ports: list[int], pids: list[int], streams: int, samples: int) -> dict[str, Any]:
    """``streams`` streams over the processes at ``ports``; the cancel → notification
    latency of ``samples`` of them and the processes' RSS with the streams open."""
    limits = httpx.Limits(max_connections=streams + 50, max_keepalive_connections=streams + 50)
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=120, limits=limits))
        clients = [RawClient(http, f"http://127.0.0.1:{port}/mcp") for port in ports]
        task_ids = []
        for i in range(streams):
            answer = await clients[i % len(clients)].call(
                "tools/call", {"name": "nap", "arguments": {"ms": 0}}
            )
            if "result" not in answer:
                raise RuntimeError(f"tools/call failed: {answer.get('error')}")
            task_ids.append(answer["result"]["taskId"])
        heard: dict[str, float] = {}
        readies = [asyncio.Event() for _ in task_ids]
        listeners: list[asyncio.Task[None]] = []
        try:
            # Opened in waves, each subscribed before the next: clients arrive over time,
            # not all in one instant (a thousand at once queue for the store's connections).
            for start in range(0, streams, WAVE):
                wave = range(start, min(start + WAVE, streams))
                listeners += [
                    asyncio.create_task(
                        listening(clients[i % len(clients)], task_ids[i], heard, readies[i])
                    )
                    for i in wave
                ]
                await asyncio.wait_for(asyncio.gather(*(readies[i].wait() for i in wave)), 120)
            await asyncio.sleep(1.0)  # every stream's subscription settled on its server
            rss = sum(resident_bytes(pid) for pid in pids)
            took = []
            for index in random.sample(range(streams), samples):  # spread, not secrecy
                other = clients[(index + 1) % len(clients)]  # another process if there is one
                sent = time.perf_counter()
                reply = await other.call("tasks/cancel", {"taskId": task_ids[index]})
                if "result" not in reply:
                    raise RuntimeError(f"tasks/cancel failed: {reply.get('error')}")
                while task_ids[index] not in heard:
                    if listeners[index].done():
                        listeners[index].result()  # its failure, raised
                        raise RuntimeError("a listen stream ended before its cancel")
                    if time.perf_counter() - sent > 30:
                        raise RuntimeError("no cancelled notification within 30 s")
                    await asyncio.sleep(0.0005)
                took.append((heard[task_ids[index]] - sent) * 1000)
        finally:
            for listener in listeners:
                listener.cancel()
            for listener in listeners:
                with contextlib.suppress(BaseException):
                    await listener
    return {
        "p50_ms": round(percentile(took, 0.5), 2),
        "p99_ms": round(percentile(took, 0.99), 2),
        "samples": samples,
        "rss_bytes": rss,
    }


def arrangement(backend: Backend, processes: int, *, quick: bool) -> dict[str, Any]:
    """1 process or several on ``backend``: :data:`FEW` then :data:`MANY` streams."""
    many = 100 if quick else MANY
    with ExitStack() as stack:
        ports, pids = serving(stack, "bench.serve_app:listening", backend.url, processes)
        few = asyncio.run(measure(ports, pids, FEW, FEW))
        try:
            lots = asyncio.run(measure(ports, pids, many, 20 if quick else 100))
        except (RuntimeError, TimeoutError) as error:
            # A finding, not a crash of the run: a store that cannot keep up with the
            # streams (their reads at the acknowledgment, at each change, or every
            # POLL_FALLBACK_S while the process's relay is away) times their reads out.
            failed = f"{type(error).__name__}: {error}"[:300]
            return {"streams_few": few, "many": many, "failed": failed}
    per_stream = (lots["rss_bytes"] - few["rss_bytes"]) / (many - FEW)
    return {
        "streams_few": few,
        "streams_many": lots,
        "many": many,
        "rss_bytes_per_stream": round(per_stream),
    }


def part(
    stack: ExitStack, directory: Path, *, quick: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each of :data:`PROCESSES` on each of :data:`STORES` (``listen.*``)."""
    found: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    backends = find_backends(stack, directory, list(STORES))
    for name in STORES:
        backend = backends.get(name)
        missing = None if backend else backends.missing.get(name, "not available")
        found[name] = {}
        for processes in PROCESSES:
            label = f"{processes} process" + ("es" if processes > 1 else "")
            figures: dict[str, Any] = {}
            if backend is not None:
                print(f"4f. {name}: listen streams on {label}", flush=True)
                figures = arrangement(backend, processes, quick=quick)
                if "failed" in figures:
                    print(f"  {name:<9}{label:<12} failed: {figures['failed']}", flush=True)
                    ratios[f"listen.{name}.p99_{processes}p_many_vs_few"] = goal(
                        (None, None), "<=", 2.0, f"{figures['many']} streams failed"
                    )
                    found[name][label] = figures
                    continue
                few, lots = figures["streams_few"], figures["streams_many"]
                print(
                    f"  {name:<9}{label:<12} {FEW} streams p50 {few['p50_ms']} p99"
                    f" {few['p99_ms']} ms; {figures['many']} streams p50 {lots['p50_ms']} p99"
                    f" {lots['p99_ms']} ms; {figures['rss_bytes_per_stream'] / 1024:.1f} KiB"
                    " per stream",
                    flush=True,
                )
            found[name][label] = figures or {"missing": missing}
            many_p99 = figures.get("streams_many", {}).get("p99_ms")
            few_p99 = figures.get("streams_few", {}).get("p99_ms")
            ratios[f"listen.{name}.p99_{processes}p_many_vs_few"] = goal(
                (many_p99, few_p99), "<=", 2.0, missing
            )
    return found, ratios

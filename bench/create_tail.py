"""Where a slow create's time goes: the end-to-end workload of section 2 (200 tasks of a
200 ms tool, 50 in flight, 50 ms polls) against our server, with every request, every store
call and the event loop's lag timed inside the server process.

    uv run --group bench python -m bench.create_tail --store postgresql://…/db?schema=x

It prints the create latency the client saw, the time the server spent on each
``tools/call``, the store calls' durations, the loop lag (how late a 5 ms sleep wakes), and
the slowest creates split into time before the server, in it, and after. A create that
waits in the store (a connection, a row lock, a commit) shows a long ``store.create`` with
a short loop lag; one that waits for the CPU shows the loop lag. docs/performance.md
quotes a run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from bench.common import free_port, percentile, server_process
from bench.served import drive
from bench.servers import ours_with_tasks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    Timed = tuple[float, float, str]

STORE_CALLS = ("create", "get", "put_status", "release", "renew", "claim")
IN_FLIGHT = 50


def serve(store_url: str, port: int, log_path: str) -> None:
    """Our bench server (``bench.servers.ours``), every request, store call and loop lag
    written to ``log_path`` as ``start end what`` (perf_counter seconds)."""
    app, tasks = ours_with_tasks(store_url, None)
    log = Path(log_path).open("w")  # noqa: SIM115 (open while the server runs)

    def timed(name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(call)
        async def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                log.write(f"{start:.6f} {time.perf_counter():.6f} store.{name}\n")

        return run

    store = tasks.store
    for name in STORE_CALLS:
        setattr(store, name, timed(name, getattr(store, name)))

    async def lag() -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            log.write(f"{start:.6f} {time.perf_counter() - 0.005:.6f} lag\n")

    lagging: list[asyncio.Task[None]] = []

    async def with_timing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if not lagging:
            lagging.append(asyncio.get_running_loop().create_task(lag()))
        start = time.perf_counter()
        method = dict(scope["headers"]).get(b"mcp-method", b"?").decode()

        async def timed_send(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                log.write(f"{start:.6f} {time.perf_counter():.6f} {method}\n")
            await send(message)

        await app(scope, receive, timed_send)

    uvicorn.run(with_timing, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def spread(label: str, ms: list[float]) -> str:
    p50, p99 = statistics.median(ms), percentile(ms, 0.99)
    return (
        f"  {label:<22} n={len(ms):5}  p50 {p50:7.2f}  p99 {p99:7.2f}  max {max(ms):7.1f} ms"
        f"  (p99/p50 {p99 / p50:.2f})"
    )


def report(created: list[tuple[float, float]], served: list[Timed]) -> str:
    begin = min(sent for sent, _ in created)
    served = [row for row in served if row[0] >= begin - 0.001]
    lines = [spread("client: create", [(b - a) * 1000 for a, b in created])]
    for what in ("tools/call", "tasks/get", *(f"store.{n}" for n in STORE_CALLS), "lag"):
        ms = [(b - a) * 1000 for a, b, kind in served if kind == what]
        if ms:
            lines.append(spread(f"server: {what}", ms))
    calls = sorted(row for row in served if row[2] == "tools/call")
    first_wave = set(sorted(created)[:IN_FLIGHT])  # sent at once as the run starts
    rows: dict[bool, list[tuple[float, float, float, float, float]]] = {True: [], False: []}
    for sent, answered in created:
        inside = [row for row in calls if sent <= row[0] <= answered]
        if inside:
            start, end, _ = inside[0]
            row = (answered - sent, start - sent, end - start, answered - end, sent)
            rows[(sent, answered) in first_wave].append(row)
    for in_first, title in ((True, "of the first wave"), (False, "after the first wave")):
        lines.append(
            f"  slowest creates {title} (ms): total = before the server + in it + after; at (s)"
        )
        for total, before, inside_s, after, sent in sorted(rows[in_first], reverse=True)[:5]:
            busy = Counter(k for a, b, k in served if a <= sent + total and b >= sent)
            lines.append(
                f"    {total * 1000:6.1f} = {before * 1000:5.1f} + {inside_s * 1000:6.1f} +"
                f" {after * 1000:5.1f}  at {sent - begin:5.2f}  meanwhile: {dict(busy)}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.store, int(args.serve[0]), args.serve[1])
        return
    port = free_port()
    log = Path(".cache/bench/create_tail.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "bench.create_tail", "--store", args.store]
    with server_process([*argv, "--serve", str(port), str(log)], port):
        asyncio.run(drive(port, IN_FLIGHT, IN_FLIGHT, 0, 50))  # warm-up
        created = asyncio.run(drive(port, 200, IN_FLIGHT, 200, 50))
        time.sleep(0.5)  # the last completions
    served: list[Timed] = []
    for line in log.read_text().splitlines():
        start, end, what = line.split()
        served.append((float(start), float(end), what))
    print(report(created, served))


if __name__ == "__main__":
    main()

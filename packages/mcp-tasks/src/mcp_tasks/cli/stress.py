"""`mcp-tasks stress [--store URL]`: a deterministic concurrent workload with exact invariants.

Timings are descriptive (they depend on the machine); the invariants are not: every task
is created once, at most one of two racing workers wins each claim, cancelled tasks are
never claimed, every other task completes with its own result, writes on terminal tasks
change nothing, and expired tasks are reaped. Only tasks it created are touched (claims
are by id); they expire after `--ttl-ms`.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from mcp_tasks.cli._stores import using_store
from mcp_tasks.domain.errors import TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.models import Complete, NewTask, Outcome, Progress, WorkSpec
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, Sequence

    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.stores.protocol import Store

LEASE_MS = 60_000
CANCEL_EVERY = 5  # every 5th task is cancelled by "the client" before any worker runs


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "run a deterministic concurrent workload on a store; check exact invariants"
    parser = commands.add_parser("stress", help=summary, description=__doc__)
    parser.add_argument("--store", metavar="URL", help="store URL (default as for serve)")
    parser.add_argument("--tasks", type=int, default=500, help="tasks to run (default 500)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent actors (16)")
    parser.add_argument("--ttl-ms", type=int, default=120_000, help="TTL of the tasks (2 min)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


@dataclass
class Report:
    store: str
    tasks: int
    phases: list[dict[str, Any]] = field(default_factory=list)
    invariants: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(item["ok"] for item in self.invariants)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.invariants.append({"name": name, "ok": ok, "detail": detail})

    def phase(self, name: str, ops: int, seconds: float) -> None:
        rate = round(ops / seconds, 1) if seconds > 0 else None
        self.phases.append(
            {"name": name, "ops": ops, "seconds": round(seconds, 3), "ops_per_s": rate}
        )


async def run_all(calls: Sequence[Callable[[], Awaitable[Any]]], concurrency: int) -> list[Any]:
    """Run every call with at most `concurrency` in flight; results in call order."""
    results: list[Any] = [None] * len(calls)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(index: int) -> None:
        async with limiter:
            results[index] = await calls[index]()

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    return results


async def workload(store: Store, tasks: int, concurrency: int, ttl_ms: int) -> Report:
    report = Report(store=repr(store), tasks=tasks)
    ids = [new_task_id() for _ in range(tasks)]

    started = time.perf_counter()
    created = await run_all(
        [
            partial(
                store.create,
                NewTask(task_id=i, ttl_ms=ttl_ms, work=WorkSpec(type="stress", input={"n": n})),
            )
            for n, i in enumerate(ids)
        ],
        concurrency,
    )
    report.phase("create", tasks, time.perf_counter() - started)
    report.check(
        "every task is created once, working, at revision 0",
        len({r.task_id for r in created}) == tasks
        and all(r.status is TaskStatus.WORKING and r.revision == 0 for r in created),
    )

    doomed = set(ids[::CANCEL_EVERY])
    started = time.perf_counter()
    await run_all([partial(store.cancel, i, ANY_OWNER) for i in doomed], concurrency)
    report.phase("cancel", len(doomed), time.perf_counter() - started)

    async def race(task_id: str) -> int:
        """Two workers claim the same task at once; the winner runs it. Returns the wins."""
        claims = await run_all(
            [partial(store.claim, f"stress-{w}", lease_ms=LEASE_MS, task_id=task_id) for w in "ab"],
            2,
        )
        winners = [c for c in claims if c is not None]
        for claimed in winners:
            await store.put_status(task_id, Progress("halfway"), lease=claimed.lease)
            result: JSONObject = {"content": [{"type": "text", "text": task_id}], "isError": False}
            await store.put_status(task_id, Complete(result), lease=claimed.lease)
        return len(winners)

    started = time.perf_counter()
    wins = await run_all([partial(race, i) for i in ids], max(1, concurrency // 2))
    report.phase("claim race + progress + complete", 2 * tasks, time.perf_counter() - started)
    report.check(
        "exactly one of two racing claims wins each live task",
        all(w == 1 for i, w in zip(ids, wins, strict=True) if i not in doomed),
    )
    report.check(
        "a cancelled task is never claimed",
        all(w == 0 for i, w in zip(ids, wins, strict=True) if i in doomed),
    )

    started = time.perf_counter()
    final = await run_all([partial(store.get, i, ANY_OWNER) for i in ids], concurrency)
    report.phase("get", tasks, time.perf_counter() - started)
    report.check(
        "every live task completed with its own result; every cancelled one stayed cancelled",
        all(
            r.status is TaskStatus.CANCELLED if r.task_id in doomed else _completed_as_itself(r)
            for r in final
        ),
    )

    started = time.perf_counter()
    after = await run_all(
        [partial(store.cancel, i, ANY_OWNER) for i in ids]
        + [partial(store.update, i, ANY_OWNER, {"nope": {"action": "accept"}}) for i in ids],
        concurrency,
    )
    report.phase("cancel + update on terminal tasks", 2 * tasks, time.perf_counter() - started)
    report.check(
        "cancel and update on a terminal task change nothing",
        all(t.outcome is Outcome.UNCHANGED for t in after),
    )

    expiring = [new_task_id() for _ in range(max(1, tasks // 10))]
    await run_all(
        [partial(store.create, NewTask(task_id=i, ttl_ms=1)) for i in expiring], concurrency
    )
    await anyio.sleep(0.05)  # past the 1 ms TTL on any store clock
    started = time.perf_counter()
    reaped = 0
    while (count := await store.reap(limit=500)) > 0:
        reaped += count
    report.phase("reap", reaped, time.perf_counter() - started)
    gone = await run_all([partial(_missing, store, i) for i in expiring], concurrency)
    report.check(
        "expired tasks are reaped and then not found",
        reaped >= len(expiring) and all(gone),
        f"{reaped} reaped",
    )
    return report


def _completed_as_itself(record: TaskRecord) -> bool:
    """Completed, with the result its own worker wrote (the task id as the text)."""
    if record.status is not TaskStatus.COMPLETED or record.result is None:
        return False
    content = record.result.get("content")
    return (
        isinstance(content, list)
        and isinstance(content[0], dict)
        and content[0].get("text") == record.task_id
    )


async def _missing(store: Store, task_id: str) -> bool:
    try:
        await store.get(task_id, ANY_OWNER)
    except TaskNotFound:
        return True
    return False


def print_report(report: Report) -> None:
    print(f"store: {report.store}   tasks: {report.tasks}")
    for phase in report.phases:
        rate = f"{phase['ops_per_s']:>10} ops/s" if phase["ops_per_s"] is not None else ""
        print(f"  {phase['name']:<36} {phase['ops']:>7} ops {phase['seconds']:>8.3f} s {rate}")
    for item in report.invariants:
        detail = f" ({item['detail']})" if item["detail"] else ""
        print(f"  {'ok ' if item['ok'] else 'FAIL'} {item['name']}{detail}")


def run(args: argparse.Namespace) -> int:
    if args.tasks < 1 or args.concurrency < 2:
        print("mcp-tasks stress: --tasks ≥ 1 and --concurrency ≥ 2", file=sys.stderr)
        return 2

    async def main() -> Report:
        async with using_store(args.store) as store:
            return await workload(store, args.tasks, args.concurrency, args.ttl_ms)

    report = anyio.run(main)
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        print_report(report)
    return 0 if report.ok else 1

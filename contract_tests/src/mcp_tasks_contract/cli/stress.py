"""`mcp-tasks stress [--store URL]`: a deterministic concurrent workload with exact invariants.

Timings are descriptive (they depend on the machine); the invariants are not: every task
is created once, at most one of two racing workers wins each claim, cancelled tasks are
never claimed, every other task completes with its own result, writes on terminal tasks
change nothing, and expired tasks are reaped. Compare-and-set contention: in every round,
`--concurrency` writers read a task's revision and write with it at once; exactly one
applies, every other gets RevisionConflict, and the final revision counts the applied
writes. Crash and recover: workers claim tasks by id; every third one crashes (its short
`--lease-ms` lease is never renewed or released) while the others complete and release;
recovery actors claim without a task id once the crashed leases ran out by the store's
clock and complete those tasks; each task completes exactly once, each crashed worker's
late commit is refused (StaleLease) and changes nothing, claims and releases balance.

In the store's namespace, only tasks it created are touched (claims there are by id); they
expire after `--ttl-ms`. Claims without a task id take any eligible task of a namespace,
so the crash-and-recover phase runs in a fresh namespace of the same store (a SQLite table
prefix, a Postgres schema, a named memory store: `stress_<random>`), dropped afterwards; a
store whose backend has no namespaces is refused (exit 2).
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from mcp_tasks.cli.kit import UsageError, resolve_store_url, using_store
from mcp_tasks.domain.errors import MCPTasksError, StaleLease, StoreUnavailable, TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.models import (
    Complete,
    NewTask,
    Outcome,
    Progress,
    RevisionConflict,
    WorkSpec,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.opening import (
    NamespacesNotSupported,
    drop_namespace,
    mask_password,
    namespaced_url,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, Sequence

    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.domain.models import Lease, TaskRecord, Transition
    from mcp_tasks.stores.protocol import Store

LEASE_MS = 60_000  # the lease of every worker that does not crash: never runs out mid-run
CANCEL_EVERY = 5  # every 5th task is cancelled by "the client" before any worker runs
CAS_EVERY = 20  # one compare-and-set contended task per 20 tasks (at least one)
CAS_ROUNDS = 4  # rounds of contention per contended task
RECOVER_EVERY = 5  # one crash-and-recover task per 5 tasks (at least CRASH_EVERY)
CRASH_EVERY = 3  # the worker of every 3rd crash-and-recover task crashes
POLL_S = 0.02  # a recovery actor that found nothing to claim tries again after this
PATIENCE_MS = 30_000  # recovery gives up this long after the crashed leases should run out


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "run a deterministic concurrent workload on a store; check exact invariants"
    parser = commands.add_parser("stress", help=summary, description=__doc__)
    parser.add_argument("--store", metavar="URL", help="store URL (default as for serve)")
    parser.add_argument("--tasks", type=int, default=500, help="tasks to run (default 500)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent actors (16)")
    parser.add_argument("--ttl-ms", type=int, default=120_000, help="TTL of the tasks (2 min)")
    parser.add_argument(
        "--lease-ms",
        type=int,
        default=400,
        help="lease of the workers that crash; recovery waits for it to run out (400)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


@dataclass
class Report:
    store: str
    tasks: int
    recovery_store: str = ""
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


async def contention(store: Store, report: Report, tasks: int, writers: int, ttl_ms: int) -> None:
    """`writers` writers race compare-and-set writes on each contended task, round by round:
    all of them read the revision (nothing writes meanwhile), then all write with it."""
    ids = [new_task_id() for _ in range(max(1, tasks // CAS_EVERY))]
    await run_all([partial(store.create, NewTask(task_id=i, ttl_ms=ttl_ms)) for i in ids], writers)
    applied: dict[str, list[Transition]] = {i: [] for i in ids}
    exact_rounds = conflicts = 0
    odd: Counter[str] = Counter()  # whatever a correct store never gives
    started = time.perf_counter()
    for round_ in range(CAS_ROUNDS):
        reads = await run_all(
            [partial(store.get, i, ANY_OWNER) for i in ids for _ in range(writers)], writers
        )
        outcomes = await run_all(
            [
                partial(_cas_write, store, i, f"writer-{w} in round {round_}", read.revision)
                for i, mine in zip(ids, _chunks(reads, writers), strict=True)
                for w, read in enumerate(mine)
            ],
            writers,  # one task's writers are in flight together
        )
        for i, mine, results in zip(
            ids, _chunks(reads, writers), _chunks(outcomes, writers), strict=True
        ):
            seen = {read.revision for read in mine}
            if len(seen) != 1:
                odd["the reads of one round disagree"] += 1
            revision = min(seen)
            wins = [done for kind, done in results if kind == Outcome.APPLIED]
            lost = [current for kind, current in results if kind == "conflict"]
            applied[i] += wins
            conflicts += len(lost)
            odd.update(kind for kind, _ in results if kind not in {Outcome.APPLIED, "conflict"})
            if (
                len(wins) == 1
                and wins[0].revision == revision + 1
                and len(lost) == writers - 1
                and all(current == revision + 1 for current in lost)
            ):
                exact_rounds += 1
    writes = CAS_ROUNDS * len(ids) * writers
    report.phase("compare-and-set contention (writes)", writes, time.perf_counter() - started)
    rounds = CAS_ROUNDS * len(ids)
    wins_total = sum(len(done) for done in applied.values())
    report.check(
        "per round per task exactly one compare-and-set write applies; "
        "every other gets RevisionConflict",
        exact_rounds == rounds and wins_total == rounds and conflicts == rounds * (writers - 1),
        f"{rounds} rounds ({len(ids)} tasks x {CAS_ROUNDS}) of {writers} writers: "
        f"{wins_total} applied, {conflicts} RevisionConflict"
        + "".join(f"; {count} {kind}" for kind, count in sorted(odd.items())),
    )
    final = await run_all([partial(store.get, i, ANY_OWNER) for i in ids], writers)
    report.check(
        "the final revision equals the applied writes: none lost or doubled",
        all(
            record.revision == len(applied[record.task_id]) == CAS_ROUNDS
            and [done.revision for done in applied[record.task_id]]
            == list(range(1, CAS_ROUNDS + 1))
            and record.status_message == applied[record.task_id][-1].record.status_message
            for record in final
        ),
        f"final revisions {sorted({record.revision for record in final})}",
    )


async def _cas_write(store: Store, task_id: str, writer: str, revision: int) -> tuple[str, Any]:
    """One contending write: ("applied", its transition), ("conflict", the revision the
    RevisionConflict saw), or anything else a correct store never answers."""
    try:
        done = await store.put_status(task_id, Progress(writer), expected_revision=revision)
    except RevisionConflict as conflict:
        return "conflict", conflict.current.revision
    except StoreUnavailable:
        raise
    except MCPTasksError as error:
        return type(error).__name__, None
    return str(done.outcome), done


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


@dataclass
class _Recovery:
    """The crash-and-recover phase on a namespace holding only its tasks: the tasks, the
    leases its actors got, and what happened to them, as it happened."""

    store: Store
    ids: list[str]
    lease_ms: int
    crashing: set[str] = field(init=False)
    claims: list[Lease] = field(default_factory=list)  # every claim that returned a task
    released: list[Lease] = field(default_factory=list)  # claims a release was seen to free
    crashed: dict[str, Lease] = field(default_factory=dict)  # the leases crashed workers keep
    recovered: list[Lease] = field(default_factory=list)  # recovery claims of this run's tasks
    completions: dict[str, list[tuple[Outcome, JSONObject]]] = field(init=False)
    late_commits: list[str] = field(default_factory=list)  # per crashed worker: what happened
    foreign: int = 0  # claims without id that returned a task this run did not create
    empty_polls: int = 0  # claims without id that found nothing (the leases still ran)

    def __post_init__(self) -> None:
        self.crashing = set(self.ids[::CRASH_EVERY])
        self.completions = {i: [] for i in self.ids}

    async def finish(self, lease: Lease) -> None:
        """Work the claimed task to completion, then release the claim."""
        store, task_id, actor = self.store, lease.task_id, lease.worker_id
        await store.put_status(task_id, Progress(f"{actor} halfway"), lease=lease)
        result = _result(task_id, actor)
        done = await store.put_status(task_id, Complete(result), lease=lease)
        self.completions[task_id].append((done.outcome, result))
        await store.release(lease)
        if (await store.get(task_id, ANY_OWNER)).claim is None:
            self.released.append(lease)

    async def worker(self, n: int, task_id: str) -> None:
        """Claim the task by id; crash holding a short lease, or complete and release."""
        crashes = task_id in self.crashing
        claimed = await self.store.claim(
            f"worker-{n}", lease_ms=self.lease_ms if crashes else LEASE_MS, task_id=task_id
        )
        if claimed is None:
            return
        self.claims.append(claimed.lease)
        if crashes:  # it stops here: never renews, never releases
            self.crashed[task_id] = claimed.lease
        else:
            await self.finish(claimed.lease)

    async def recover(self, actor: str, give_up: float) -> None:
        """Claim without a task id until every crashed task is recovered (or patience ends)."""
        while len(self.recovered) < len(self.crashed) and anyio.current_time() < give_up:
            claimed = await self.store.claim(actor, lease_ms=LEASE_MS)
            if claimed is None:
                self.empty_polls += 1
                await anyio.sleep(POLL_S)
                continue
            self.claims.append(claimed.lease)
            if claimed.lease.task_id not in self.completions:
                self.foreign += 1
                await self.store.release(claimed.lease)
                await anyio.sleep(POLL_S)
                continue
            self.recovered.append(claimed.lease)
            await self.late_commit(claimed.lease.task_id)
            await self.finish(claimed.lease)

    async def late_commit(self, task_id: str) -> None:
        """The crashed worker wakes up and commits with its stale lease, while a recovery
        actor holds the task."""
        store, lease = self.store, self.crashed.get(task_id)
        if lease is None:
            self.late_commits.append("recovered a task no crashed worker held")
            return
        before = await store.get(task_id, ANY_OWNER)
        result = _result(task_id, lease.worker_id)
        try:
            done = await store.put_status(task_id, Complete(result), lease=lease)
        except StaleLease:
            after = await store.get(task_id, ANY_OWNER)
            self.late_commits.append("refused" if after == before else "refused, but changed")
        else:
            self.completions[task_id].append((done.outcome, result))
            self.late_commits.append(f"accepted ({done.outcome})")


async def crash_and_recover(
    store: Store, report: Report, *, tasks: int, concurrency: int, ttl_ms: int, lease_ms: int
) -> None:
    """Workers claim tasks by id; every CRASH_EVERY-th crashes holding a `lease_ms` lease,
    the others complete and release. Recovery actors claim without an id, so `store` must
    be a namespace holding only this phase's tasks."""
    phase = _Recovery(
        store, [new_task_id() for _ in range(max(CRASH_EVERY, tasks // RECOVER_EVERY))], lease_ms
    )
    ids = phase.ids

    started = time.perf_counter()
    await run_all(
        [
            partial(
                store.create,
                NewTask(
                    task_id=i, ttl_ms=ttl_ms, work=WorkSpec(type="stress-recover", input={"n": n})
                ),
            )
            for n, i in enumerate(ids)
        ],
        concurrency,
    )
    report.phase("recover: create", len(ids), time.perf_counter() - started)

    started = time.perf_counter()
    await run_all([partial(phase.worker, n, i) for n, i in enumerate(ids)], concurrency)
    report.phase("recover: workers claim; 1 in 3 crash", len(ids), time.perf_counter() - started)

    started = time.perf_counter()
    give_up = anyio.current_time() + (lease_ms + PATIENCE_MS) / 1000
    actors = [f"recover-{j}" for j in range(min(concurrency, len(phase.crashed)))]
    await run_all([partial(phase.recover, actor, give_up) for actor in actors], concurrency)
    report.phase(
        "recover: wait out leases; claim w/o id",
        len(phase.recovered),
        time.perf_counter() - started,
    )
    leftover = await store.claim("stress-sweeper", lease_ms=LEASE_MS)
    if leftover is not None:
        await store.release(leftover.lease)
    records = await run_all([partial(store.get, i, ANY_OWNER) for i in ids], concurrency)
    _check_recovery(report, phase, {r.task_id: r for r in records}, nothing_left=leftover is None)


def _check_recovery(
    report: Report, phase: _Recovery, final: dict[str, TaskRecord], *, nothing_left: bool
) -> None:
    ids, crashing, crashed, recovered = phase.ids, phase.crashing, phase.crashed, phase.recovered
    workers = [c for c in phase.claims if c.worker_id.startswith("worker-")]
    report.check(
        "workers claim their own tasks by id, each once, at generation 1",
        sorted(c.task_id for c in workers) == sorted(ids)
        and all(c.generation == 1 for c in workers),
        f"{len(workers)} claims for {len(ids)} tasks",
    )
    # The store's now at a recovery claim is its lease's expiry minus LEASE_MS.
    in_time = [r for r in recovered if r.task_id in crashed]
    report.check(
        "recovery claims without a task id take exactly the crashed tasks, once each, "
        "at generation 2, only after their leases ran out by the store's clock",
        sorted(r.task_id for r in recovered) == sorted(crashed) == sorted(crashing)
        and all(r.generation == 2 for r in recovered)
        and all(r.expires_at - LEASE_MS >= crashed[r.task_id].expires_at for r in in_time),
        f"{len(crashed)} crashed, {len(recovered)} recovered; "
        f"{phase.empty_polls} claims without id found nothing while the leases ran",
    )
    report.check(
        "recovery claimed only this run's tasks; then nothing was left to claim",
        phase.foreign == 0 and nothing_left,
        f"{phase.foreign} claims of other tasks"
        + ("" if nothing_left else "; a claim without id still found a task"),
    )
    applied = {
        i: [result for outcome, result in done if outcome is Outcome.APPLIED]
        for i, done in phase.completions.items()
    }
    # Who may complete a task: the holder of its last claim (its worker, or the recovery).
    holder = {c.task_id: c.worker_id for c in sorted(phase.claims, key=lambda c: c.generation)}
    report.check(
        "every task completes exactly once, with the result of its one applied Complete, "
        "written by the holder of its last claim",
        all(
            len(applied[i]) == 1
            and final[i].status is TaskStatus.COMPLETED
            and final[i].result == applied[i][0] == _result(i, holder.get(i, ""))
            for i in ids
        ),
        f"{len(ids)} tasks, {sum(len(results) for results in applied.values())} "
        "applied completions",
    )
    outcomes = Counter(phase.late_commits)
    report.check(
        "every late commit with a crashed worker's stale lease is refused (StaleLease) "
        "and changes nothing",
        outcomes == Counter({"refused": len(crashing)}) and len(crashed) == len(crashing),
        f"{len(crashed)} crashes; late commits: "
        + ", ".join(f"{count} {kind}" for kind, count in sorted(outcomes.items())),
    )
    # Each claim ends exactly once: a worker that completes releases it (and so does a
    # recovery actor); a crashed worker's claim runs out, proven by the recovery claim of
    # the next generation. No task may hold a claim at the end.
    ran_out = sum(
        1
        for r in recovered
        if r.task_id in crashed and r.generation == crashed[r.task_id].generation + 1
    )
    by_workers = sum(1 for r in phase.released if r.worker_id.startswith("worker-"))
    by_recovery = len(phase.released) - by_workers
    healthy = len(ids) - len(crashing)
    report.check(
        "claims and releases balance: each claim ends once, by a release after completing "
        "or (a crashed worker's) by running out",
        len(phase.claims) == len(phase.released) + ran_out
        and by_workers == healthy
        and by_recovery == len(recovered)
        and ran_out == len(crashing)
        and all(record.claim is None for record in final.values()),
        f"{len(phase.claims)} claims = {by_workers} released by workers after completing "
        f"+ {by_recovery} released by recovery after completing + {ran_out} ran out",
    )
    report.check(
        "a normal task ends at generation 1, a recovered one at generation 2",
        all(final[i].generation == (2 if i in crashing else 1) for i in ids),
        f"{healthy} at 1, {len(crashing)} at 2 expected; got "
        + ", ".join(
            f"{count} at {generation}"
            for generation, count in sorted(Counter(r.generation for r in final.values()).items())
        ),
    )


def _result(task_id: str, actor: str) -> JSONObject:
    return {"content": [{"type": "text", "text": f"{task_id} by {actor}"}], "isError": False}


def print_report(report: Report) -> None:
    print(f"store: {report.store}   tasks: {report.tasks}")
    if report.recovery_store:
        print(f"crash-and-recover namespace (dropped afterwards): {report.recovery_store}")
    for phase in report.phases:
        rate = f"{phase['ops_per_s']:>10} ops/s" if phase["ops_per_s"] is not None else ""
        print(f"  {phase['name']:<40} {phase['ops']:>7} ops {phase['seconds']:>8.3f} s {rate}")
    for item in report.invariants:
        detail = f" ({item['detail']})" if item["detail"] else ""
        print(f"  {'ok ' if item['ok'] else 'FAIL'} {item['name']}{detail}")


def _fresh_namespace(url: str) -> str:
    """A new namespace of the store `url` names, for the claims without a task id.

    Raises:
        UsageError: the backend has no namespaces.
        InvalidStoreURL: the backend cannot read `url` (as opening the store would say).
    """
    try:
        return namespaced_url(url, f"stress_{secrets.token_hex(6)}")
    except NamespacesNotSupported as error:
        raise UsageError(
            "this store's backend has no namespaces; the crash-and-recover phase claims "
            "without a task id, so it only runs in a fresh namespace of its own",
            hint="give stress a store whose backend supports namespaced_url",
        ) from error


def run(args: argparse.Namespace) -> int:
    if args.tasks < 1 or args.concurrency < 2 or args.lease_ms < 1:
        print(
            "mcp-tasks stress: --tasks ≥ 1, --concurrency ≥ 2 and --lease-ms ≥ 1",
            file=sys.stderr,
        )
        return 2
    url = resolve_store_url(args.store)
    recovery_url = _fresh_namespace(url)

    async def main() -> Report:
        async with using_store(url) as store:
            report = await workload(store, args.tasks, args.concurrency, args.ttl_ms)
            await contention(store, report, args.tasks, args.concurrency, args.ttl_ms)
        report.recovery_store = mask_password(recovery_url)
        async with using_store(recovery_url) as fresh:
            try:
                await crash_and_recover(
                    fresh,
                    report,
                    tasks=args.tasks,
                    concurrency=args.concurrency,
                    ttl_ms=args.ttl_ms,
                    lease_ms=args.lease_ms,
                )
            finally:
                with anyio.CancelScope(shield=True):
                    await fresh.close()
                    await drop_namespace(recovery_url)
        return report

    report = anyio.run(main)
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        print_report(report)
    return 0 if report.ok else 1

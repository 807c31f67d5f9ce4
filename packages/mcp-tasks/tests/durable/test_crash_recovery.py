"""Tasks outlive the process running them: two real processes on one durable store (a SQLite
file, a Postgres schema). The first is killed (SIGKILL) or stopped (SIGTERM) mid-task; the
second runs every task again and commits each exactly once.

The app (``crash_app``) logs every body run and every applied terminal write to a file the
test reads; its lease is ``LEASE_S``. Bounds are generous multiples only where a process
must start; the takeover bounds are the ones the docs promise (lease + 2 s after SIGKILL,
2 s after SIGTERM).
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client

if TYPE_CHECKING:
    from conftest import Processes
    from mcp.client.client import Client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TASKS = 10
#: Long enough that every body is still running when the test has seen them all start, on a
#: loaded machine too (the kill must come mid-task).
BODY_S = 5.0
LEASE_S = 3.0
CONFORMANCE_SERVER = (
    __import__("pathlib").Path(__file__).resolve().parents[4] / "conformance" / "server.py"
)


async def create_tasks(url: str, tool: str, arguments: dict[str, Any], n: int) -> list[str]:
    """Create ``n`` tasks at once, so that their bodies start together: one after another,
    on a loaded machine the first could end before the last began."""
    ids: list[str] = []

    async def create() -> None:
        handle = await start_tool(client, tool, arguments)
        assert isinstance(handle, TaskHandle)
        ids.append(handle.task_id)

    async with tasks_client(url) as client, anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(create)
    return ids


async def states(url: str, ids: list[str]) -> dict[str, TaskState]:
    async with tasks_client(url) as client:
        return await states_on(client, ids)


async def states_on(client: Client, ids: list[str]) -> dict[str, TaskState]:
    return {task_id: await TaskHandle.attach(client, task_id).get() for task_id in ids}


async def wait_for_states(
    url: str, ids: list[str], done: Any, *, timeout_s: float
) -> dict[str, TaskState]:
    """Poll ``url`` until ``done(states)``; fail after ``timeout_s`` with the last states.
    One session for every poll: a session per poll (its handshake) cost the client and the
    server more than the polls themselves."""
    seen: dict[str, TaskState] = {}
    with anyio.move_on_after(timeout_s):
        async with tasks_client(url) as client:
            while True:
                seen = await states_on(client, ids)
                if done(seen):
                    return seen
                await anyio.sleep(0.1)
    raise AssertionError(f"timed out; statuses {Counter(s.status for s in seen.values())}")


def all_running_in(pid: int) -> Any:
    """Every task working, its body running in ``pid`` (an ended task keeps its last
    message: a body that already ended there is not running)."""
    return lambda seen: all(
        s.status == "working" and (s.status_message or "").startswith(f"running in {pid} (")
        for s in seen.values()
    )


def all_completed(seen: dict[str, TaskState]) -> bool:
    return all(s.status == "completed" for s in seen.values())


async def wait_for_runs(processes: Processes, ids: list[str], pid: int, timeout_s: float) -> float:
    """Seconds until every task has a body run in ``pid`` (read from the app's log)."""
    start = time.monotonic()
    with anyio.fail_after(timeout_s):
        # The log is written by another process: there is nothing to wait on but the file.
        while not set(ids) <= {t for p, t, _ in processes.lines("run") if p == pid}:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return time.monotonic() - start


def assert_committed_once_by(processes: Processes, ids: list[str], pid: int) -> list[float]:
    """Each task committed exactly once, ``completed``, by ``pid``; returns the commits'
    wall-clock times."""
    commits = processes.lines("commit")
    assert Counter(t for _, t, _ in commits) == dict.fromkeys(ids, 1), "one commit per task"
    assert {(p, what.split()[0]) for p, _, what in commits} == {(pid, "completed")}
    return [float(what.split()[1]) for _, _, what in commits]


@pytest.mark.parametrize("second", ["serve", "worker"])
async def test_sigkill_mid_task_another_process_completes_every_task_once(
    processes: Processes, second: str
) -> None:
    """Ten 5-second tasks start on process A; A is SIGKILLed mid-task. Process B (a server,
    or a worker) runs each again once A's lease ran out, within lease + 2 s of the kill,
    and commits each completion once, within lease + 2 s + the body's 5 s; clients poll B."""
    lease_ms = str(int(LEASE_S * 1000))
    first = await processes.serve(CRASH_LEASE_MS=lease_ms)
    other = await (processes.serve if second == "serve" else processes.worker)(
        CRASH_LEASE_MS=lease_ms
    )
    assert first.url is not None
    ids = await create_tasks(first.url, "slow", {"seconds": BODY_S}, TASKS)
    await wait_for_states(first.url, ids, all_running_in(first.pid), timeout_s=30)
    first.kill()
    killed_at = time.time()
    assert await first.wait() == -9
    takeover_s = await wait_for_runs(processes, ids, other.pid, timeout_s=60)
    # The poll loop itself adds up to a few hundredths; the bound is the promise.
    assert takeover_s <= LEASE_S + 2, f"takeover took {takeover_s:.2f}s"
    reader = other.url or (await processes.serve(CRASH_LEASE_MS=lease_ms)).url
    assert reader is not None
    final = await wait_for_states(reader, ids, all_completed, timeout_s=60)
    # When the commits happened (the app's own clock), not when the polls saw them.
    done_s = max(assert_committed_once_by(processes, ids, other.pid)) - killed_at
    print(f"SIGKILL: takeover {takeover_s:.2f}s, last commit {done_s:.2f}s after the kill")
    assert done_s <= LEASE_S + 2 + BODY_S, f"the last commit came {done_s:.2f}s after the kill"
    assert {s.call_tool_result().content[0].text for s in final.values()} == {  # type: ignore[union-attr]
        f"done by {other.pid}"
    }
    runs = Counter((p, t) for p, t, _ in processes.lines("run"))
    assert all(runs[(first.pid, t)] == 1 and runs[(other.pid, t)] == 1 for t in ids)


async def test_sigterm_hands_the_work_over_at_once(processes: Processes) -> None:
    """On SIGTERM process A cancels its bodies and releases their leases before it exits
    (uvicorn re-raises the SIGTERM it handled once the lifespan has ended), so B runs every
    task again within 2 s of the signal, long before the lease would have run out, and
    completes each once. B looks for unheld work on its own only hourly: only the work
    signal A sends with each release can wake it in time."""
    long_lease = "60000"  # a takeover within 2 s cannot come from an expired lease
    hourly = "3600"  # nor from B's recovery poll
    first = await processes.serve(CRASH_LEASE_MS=long_lease, CRASH_RECOVERY_S=hourly)
    other = await processes.serve(CRASH_LEASE_MS=long_lease, CRASH_RECOVERY_S=hourly)
    assert first.url is not None
    assert other.url is not None
    ids = await create_tasks(first.url, "slow", {"seconds": BODY_S}, TASKS)
    await wait_for_states(first.url, ids, all_running_in(first.pid), timeout_s=30)
    first.terminate()
    takeover_s = await wait_for_runs(processes, ids, other.pid, timeout_s=60)
    print(f"SIGTERM: takeover {takeover_s:.2f}s after the signal")
    assert takeover_s <= 2, f"takeover took {takeover_s:.2f}s"
    assert await first.wait() == -signal.SIGTERM
    await wait_for_states(other.url, ids, all_completed, timeout_s=60)
    assert_committed_once_by(processes, ids, other.pid)


async def test_a_retry_waits_its_delay_across_a_restart(processes: Processes) -> None:
    """``flaky`` asks for one retry (delay 2 s) on its first run. The process that ran it is
    killed once the retry is written; another process, idle and looking for work every
    0.2 s, runs the retry, not before the delay has passed on the store's clock (the run
    begins at or after the record's ``retry_at``, 2 s after the retry's write), and the
    task completes on attempt 1."""
    first = await processes.serve()
    other = await processes.serve(CRASH_RECOVERY_S="0.2")
    assert first.url is not None
    assert other.url is not None
    (task_id,) = await create_tasks(first.url, "flaky", {}, 1)
    with anyio.fail_after(30):
        while not any(t == task_id for _, t, _ in processes.lines("retry")):  # noqa: ASYNC110
            await anyio.sleep(0.02)
    first.kill()
    final = await wait_for_states(other.url, [task_id], all_completed, timeout_s=60)
    runs = [(p, what) for p, t, what in processes.lines("run") if t == task_id]
    assert runs == [(first.pid, "attempt=0"), (other.pid, "attempt=1")]
    ((written_ms, retry_at_ms),) = [
        tuple(map(int, what.split())) for _, t, what in processes.lines("retry") if t == task_id
    ]
    assert retry_at_ms - written_ms == 2_000
    began_s = [float(what) for _, t, what in processes.lines("began") if t == task_id]
    # One clock: the store's and the app's are this machine's (1 ms of rounding allowed).
    assert began_s[1] * 1000 >= retry_at_ms - 1, f"{retry_at_ms / 1000 - began_s[1]:.3f}s early"
    text = final[task_id].call_tool_result().content[0].text  # type: ignore[union-attr]
    assert text == "done on attempt 1"


async def test_exhausted_retries_fail_with_the_bodys_error(processes: Processes) -> None:
    """``hopeless`` asks for a retry on every run; after its two delays the third request
    fails the task with exactly that run's error, in one write."""
    first = await processes.serve()
    assert first.url is not None
    (task_id,) = await create_tasks(first.url, "hopeless", {}, 1)
    final = await wait_for_states(
        first.url, [task_id], lambda s: s[task_id].status == "failed", timeout_s=60
    )
    assert final[task_id].error == {
        "code": -32000,
        "message": "still broken on attempt 2",
        "data": {"a": 2},
    }
    runs = [what for _, t, what in processes.lines("run") if t == task_id]
    assert runs == ["attempt=0", "attempt=1", "attempt=2"]
    assert [w.split()[0] for _, t, w in processes.lines("commit") if t == task_id] == ["failed"]


async def test_the_conformance_server_as_two_processes(
    processes: Processes, store_url: str
) -> None:
    """The fixture server (conformance/server.py) run twice on one store: ten
    ``slow_compute`` tasks of the first, SIGKILLed mid-task, are completed by the second."""
    script = str(CONFORMANCE_SERVER)
    lease = str(int(LEASE_S * 1000))
    # Port 0: each server binds a free port itself and says which.
    first, other = [
        await processes.start(
            [sys.executable, script, "--store", store_url, "--port", "0", "--lease-ms", lease]
        )
        for _ in range(2)
    ]
    first_url, other_url = first.url, other.url
    assert first_url is not None
    assert other_url is not None
    ids = await create_tasks(first_url, "slow_compute", {"seconds": BODY_S}, TASKS)
    await wait_for_states(
        first_url, ids, lambda s: all(x.status_message for x in s.values()), timeout_s=30
    )
    first.kill()
    killed_at = time.monotonic()
    final = await wait_for_states(other_url, ids, all_completed, timeout_s=60)
    done_s = time.monotonic() - killed_at
    print(f"conformance server: all completed {done_s:.2f}s after the kill")
    assert done_s <= LEASE_S + 2 + BODY_S + 2
    texts = {s.call_tool_result().content[0].text for s in final.values()}  # type: ignore[union-attr]
    assert texts == {f"Computed result after {BODY_S:g}s"}


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_a_tool_that_is_not_rerun_fails_when_interrupted(processes: Processes) -> None:
    """A ``recovery="fail"`` task and a re-run task run on process A; A is SIGKILLed
    mid-body. Process B, once A's lease ran out, fails the first with "The task was
    interrupted; this tool is not re-run" without running its body, and runs the second
    again to completion. (The policy reads only the claimed record, the same on every
    store: one store suffices here.)"""
    lease_ms = str(int(LEASE_S * 1000))
    first = await processes.serve(CRASH_LEASE_MS=lease_ms)
    second = await processes.serve(CRASH_LEASE_MS=lease_ms)
    assert first.url is not None
    assert second.url is not None
    (paid,) = await create_tasks(first.url, "pay", {"seconds": 60}, 1)
    (rerun,) = await create_tasks(first.url, "slow", {"seconds": 0.5}, 1)
    await wait_for_states(first.url, [paid, rerun], all_running_in(first.pid), timeout_s=30)
    first.kill()
    assert await first.wait() == -9

    def settled(seen: dict[str, TaskState]) -> bool:
        return seen[paid].status == "failed" and seen[rerun].status == "completed"

    final = await wait_for_states(second.url, [paid, rerun], settled, timeout_s=60)
    assert final[paid].error == {
        "code": -32603,
        "message": "The task was interrupted; this tool is not re-run",
    }
    runs = processes.lines("run")
    assert [p for p, t, _ in runs if t == paid] == [first.pid], "never run again"
    assert [p for p, t, _ in runs if t == rerun] == [first.pid, second.pid]
    assert [t for _, t, what in processes.lines("commit") if what.startswith("completed")] == [
        rerun
    ]


@pytest.mark.parametrize("other_as", ["serve", "worker"])
async def test_another_app_on_the_store_leaves_tasks_of_tools_it_lacks_alone(
    processes: Processes, other_as: str
) -> None:
    """Two apps on one store (S-CLAIM.4): app A (``crash_app``) starts five tasks of its
    tool ``slow`` and is stopped cleanly (SIGTERM hands them back at once). App B
    (``other_app``, no ``slow``) then runs on the same store for a few seconds of recovery
    polls and ends none of them; A comes back and completes all five, once each."""
    first = await processes.serve()
    assert first.url is not None
    ids = await create_tasks(first.url, "slow", {"seconds": BODY_S}, 5)
    await wait_for_states(first.url, ids, all_running_in(first.pid), timeout_s=30)
    first.terminate()
    assert await first.wait() == -signal.SIGTERM
    other = await (processes.serve if other_as == "serve" else processes.worker)("other_app:mcp")
    await anyio.sleep(3)  # three of B's recovery polls (one a second), each a claim
    assert processes.lines("commit") == [], "app B ended a task of app A"
    assert not [line for line in other.output if "no executor" in line]
    assert any("running the tasks of tools: other" in line for line in other.output)
    again = await processes.serve()
    assert again.url is not None
    await wait_for_states(again.url, ids, all_completed, timeout_s=60)
    assert_committed_once_by(processes, ids, again.pid)

"""A skewed clock changes nothing: two servers on one durable store (SQLite, Postgres,
Redis, MongoDB), one of them with its wall clock 90 s ahead or 90 s behind (Debian's
libfaketime; the test asserts that its bodies see that clock). Leases, retries and TTLs
are decided by the store's clock (the database server's; on SQLite the file's, see
mcp_tasks_sqlite.store_time), so the skewed server takes no task from the other's live
lease, the other takes none from its, each body starts once, and a SIGKILLed server's tasks
are taken over within lease + the recovery interval + 2 s.

libfaketime's settings (see :func:`serve_skewed`):

* ``FAKETIME_DONT_FAKE_MONOTONIC=1``: a stepped wall clock (NTP, an operator, a resumed VM)
  never moves the kernel's monotonic clocks (nor ``CLOCK_BOOTTIME``), and libfaketime would
  otherwise move them too.
* ``FAKETIME_FORCE_MONOTONIC_FIX=0``: libfaketime 0.9.10 turns this "fix" on by itself on
  glibc 2.30 and later. It then rewrites the deadline of a ``pthread_cond_timedwait`` on a
  ``CLOCK_MONOTONIC`` condition as the real monotonic time plus (deadline minus libfaketime's
  *faked* monotonic time), and it fakes that one even under ``DONT_FAKE_MONOTONIC``: an
  epoch-sized value, so the deadline handed to glibc is about -1.8e9 s and every such wait
  times out at once, without waiting. CPython waits for the GIL that way (5 ms at a time,
  then asks the holder to drop it), so a thread waiting for the GIL spins and makes the
  holder hand it over at every check. Of two threads counting for 2 s in a faked process,
  the one waiting for the GIL counted about 100 instead of millions, and the SQLite
  store's connection threads starved (the skewed server let leases lapse and ran tasks
  twice, no clock's doing). With the fix off libfaketime passes a monotonic deadline
  through unchanged (glibc 2.36 hands it to the kernel as it is), and the GIL is handed
  over as without libfaketime.
* ``libfaketimeMT.so.1``: the variant that takes a lock around its cached state of the
  faked time; the server's threads (the SQLite store's connections, anyio's worker
  threads) read the clock too.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from conftest import durable_url
from test_crash_recovery import create_tasks, states, wait_for_states

from mcp_tasks.stores.opening import with_query

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from conftest import Process, Processes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SKEW_S = 90
#: Longer than the crash tests' 3 s: a libfaketime'd process on a loaded 2-core machine can
#: miss a 1 s heartbeat by seconds, and a late renewal is not what this test is about (a
#: clock 90 s off shows whatever the lease).
LEASE_S = 10.0
#: Each server's own tasks: some on each, so that a theft in either direction shows.
TASKS_EACH = 5
#: Long enough that every body still runs at the kill, after the watch below, on a loaded
#: machine too.
BODY_S = 30.0
#: A taken-over body's run: what is asserted of it is that it starts in time, runs once and
#: commits once, none of which needs it to last.
RERUN_S = 1.0
#: How long both run side by side before the kill: a lease, many recovery polls.
WATCH_S = LEASE_S
#: The survivor's recovery loop looks for lapsed leases this often (crash_app's default).
RECOVERY_S = 1.0
#: A killed server's leases lapse at most a lease after the kill (its last renewal came
#: before it), the survivor's next recovery look is at most RECOVERY_S later, and 2 s are
#: for a loaded 2-core machine to claim and start five bodies. A clock-bound takeover would
#: be late by the skew, 90 s.
TAKEOVER_S = LEASE_S + RECOVERY_S + 2
#: The stores' wait bound here (see the test).
BOUND_MS = 30_000


@pytest.fixture(params=["sqlite", "postgres", "redis", "mongodb"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A SQLite file, or a fresh namespace of a server-backed durable store."""
    async with durable_url(request, tmp_path) as url:
        yield url


def libfaketime() -> str:
    """Debian's libfaketime (package ``faketime``), its thread-safe variant, preloaded into
    the server itself: the ``faketime`` command would run the server as a child, with a
    process id of its own."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not found:
        if os.environ.get("CI"):
            pytest.fail("libfaketime is not installed (.ci/run installs the faketime package)")
        pytest.skip("libfaketime is not installed (Debian: apt-get install faketime)")
    return str(found[0])


async def serve_skewed(processes: Processes, offset: str, lease_ms: str) -> Process:
    """``mcp-tasks serve`` of crash_app with its wall clock ``offset`` off (e.g. ``+90s``);
    the module's docstring says why each setting."""
    return await processes.serve(
        CRASH_LEASE_MS=lease_ms,
        LD_PRELOAD=libfaketime(),
        FAKETIME=offset,
        FAKETIME_DONT_FAKE_MONOTONIC="1",
        FAKETIME_FORCE_MONOTONIC_FIX="0",
    )


def assert_clock_of(processes: Processes, ids: list[str], pid: int, skew_s: float) -> None:
    """Each body of ``ids`` that ``pid`` began saw a wall clock ``skew_s`` off this test's
    (within half the skew: a body began before this test read its ``began`` line)."""
    now = time.time()
    began = [float(w) for p, t, w in processes.lines("began") if p == pid and t in ids]
    assert len(began) == len(ids)
    off = [round(b - now) for b in began]
    assert all(abs(o - skew_s) < SKEW_S / 2 for o in off), f"{pid}'s clock off by {off} s"


async def wait_for_runs_of(processes: Processes, ids: list[str], pid: int) -> float:
    """Seconds until every task of ``ids`` has a body run in ``pid``."""
    start = time.monotonic()
    with anyio.fail_after(60):
        while not set(ids) <= {t for p, t, _ in processes.lines("run") if p == pid}:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return time.monotonic() - start


@pytest.mark.parametrize(
    ("skew", "killed"),
    # The kill whose takeover a per-process clock would delay by the skew: the slow clock's
    # server would wait the skew out, or the fast clock's leases would look live to the other.
    [(f"+{SKEW_S}s", "skewed"), (f"-{SKEW_S}s", "normal")],
)
async def test_a_skewed_server_steals_no_lease_and_takes_over_in_time(
    processes: Processes, skew: str, killed: str
) -> None:
    """Servers N (this machine's clock) and S (``skew``) on one store, five tasks started
    on each. For two leases neither runs a task of the other; then one is SIGKILLed and
    the other runs each of its tasks again (a short run) within ``TAKEOVER_S``. Every task
    completes, each committed once by the survivor; the survivor's own tasks ran once."""
    lease_ms = str(int(LEASE_S * 1000))
    # What this test proves is not the store's wait bound: on a loaded machine a renewal
    # that outwaits 5 s fails for the load, not for a clock.
    processes.store_url = with_query(processes.store_url, timeout_ms=str(BOUND_MS))
    normal = await processes.serve(CRASH_LEASE_MS=lease_ms)
    skewed = await serve_skewed(processes, skew, lease_ms)
    assert normal.url is not None
    assert skewed.url is not None
    arguments = {"seconds": BODY_S, "rerun_seconds": RERUN_S}
    mine = {
        normal.pid: await create_tasks(normal.url, "slow", arguments, TASKS_EACH),
        skewed.pid: await create_tasks(skewed.url, "slow", arguments, TASKS_EACH),
    }
    for pid, ids in mine.items():  # each server runs the tasks it created
        await wait_for_runs_of(processes, ids, pid)
    assert_clock_of(processes, mine[normal.pid], normal.pid, 0)
    assert_clock_of(processes, mine[skewed.pid], skewed.pid, int(skew.removesuffix("s")))
    await anyio.sleep(WATCH_S)
    runs = Counter((p, t) for p, t, _ in processes.lines("run"))
    assert runs == {(pid, t): 1 for pid, ids in mine.items() for t in ids}, "a live lease taken"

    dead, survivor = (skewed, normal) if killed == "skewed" else (normal, skewed)
    assert survivor.url is not None
    before = await states(survivor.url, mine[dead.pid])
    assert {s.status for s in before.values()} == {"working"}, "killed mid-task"
    dead.kill()
    assert await dead.wait() == -9
    takeover_s = await wait_for_runs_of(processes, mine[dead.pid], survivor.pid)
    print(f"skew {skew}, {killed} server killed: takeover {takeover_s:.2f}s")
    assert takeover_s <= TAKEOVER_S, f"takeover took {takeover_s:.2f}s"

    every = mine[dead.pid] + mine[survivor.pid]
    await wait_for_states(
        survivor.url,
        every,
        lambda s: all(x.status == "completed" for x in s.values()),
        timeout_s=60,
    )
    commits = processes.lines("commit")
    assert Counter(t for _, t, _ in commits) == dict.fromkeys(every, 1), "one commit per task"
    assert {p for p, _, _ in commits} == {survivor.pid}
    runs = Counter((p, t) for p, t, _ in processes.lines("run"))
    assert runs == {
        **{(survivor.pid, t): 1 for t in every},
        **{(dead.pid, t): 1 for t in mine[dead.pid]},
    }, "each body started once per server that held its lease"

"""The store's clock on one SQLite file is the file's: a process whose wall clock is 90 s
off (here: ``time.time_ns`` moved while a second store handle opens and works, as a
process with a stepped clock would see it) still takes no live lease and takes over an
abandoned one when the lease has run out, not 90 s early or late."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import NewTask, WorkSpec, new_task_id
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

LEASE_MS = 3_000
LEASE_S = LEASE_MS / 1000
#: Tries at a claim that ends within the lease (a loaded machine may be too slow for one).
ATTEMPTS = 3
SKEW_NS = 90 * 1_000_000_000


@pytest.mark.parametrize("skew_ns", [SKEW_NS, -SKEW_NS], ids=["ahead", "behind"])
async def test_a_skewed_process_takes_no_live_lease_and_takes_over_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skew_ns: int
) -> None:
    """Handle A (this machine's clock) creates a task claimed for 3 s. Handle B, with a
    wall clock ``skew_ns`` off, cannot claim it while A's lease lives, and claims it once
    the lease has run out (within a second of it)."""
    path = tmp_path / "tasks.db"
    first = SQLiteTaskStore(path)
    real_time_ns = time.time_ns
    second: SQLiteTaskStore | None = None
    try:
        for _ in range(ATTEMPTS):
            task_id = new_task_id()
            # The lease begins at the store's now during create: between these two moments.
            before = time.monotonic()
            await first.create(
                NewTask(task_id, work=WorkSpec("job"), claimed_by="a", lease_ms=LEASE_MS)
            )
            after = time.monotonic()
            monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + skew_ns)
            second = second or SQLiteTaskStore(path)
            taken = await second.claim("b", lease_ms=LEASE_MS, task_id=task_id)
            if time.monotonic() - before < LEASE_S:
                break  # the claim ended while the lease surely lived: it must have failed
            # A machine too loaded to ask within the lease proves nothing: a new task.
            monkeypatch.undo()
        else:
            pytest.fail(f"no claim ended within the {LEASE_S} s lease in {ATTEMPTS} tries")
        assert taken is None, "a live lease taken"
        while (claimed := await second.claim("b", lease_ms=LEASE_MS, task_id=task_id)) is None:
            assert time.monotonic() - after < LEASE_S + 1, "taken over late"
            await anyio.sleep(0.02)
        assert time.monotonic() - before >= LEASE_S - 0.05, "taken over early"
        assert claimed.record.generation == 2
    finally:
        monkeypatch.undo()
        if second is not None:
            await second.close()
        await first.close()

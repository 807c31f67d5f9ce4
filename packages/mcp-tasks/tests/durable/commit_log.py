"""What the durable tests' apps log to ``CRASH_LOG`` (see ``crash_app``): one line per body
run, applied task end and applied retry, with the process id."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from mcp_tasks import Outcome

if TYPE_CHECKING:
    from mcp_tasks.domain.models import Lease, StatusChange, Transition
    from mcp_tasks.stores.protocol import Store

LOG = os.environ["CRASH_LOG"]


def log(kind: str, task_id: str, what: str) -> None:
    # One short write in append mode: lines of concurrent processes never interleave.
    with open(LOG, "a", encoding="utf-8") as file:
        file.write(f"{kind} {os.getpid()} {task_id} {what}\n")


def ran_before(task_id: str) -> bool:
    """Whether a body run of ``task_id`` is logged already: a run that this one takes over."""
    try:
        with open(LOG, encoding="utf-8") as file:
            return any(line.split()[::2] == ["run", task_id] for line in file)
    except FileNotFoundError:  # nothing logged yet
        return False


class CommitLog:
    """A Store that delegates everything and logs each applied terminal write."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        transition = await self._store.put_status(
            task_id, change, lease=lease, expected_revision=expected_revision, event_id=event_id
        )
        record = transition.record
        if transition.outcome is Outcome.APPLIED and record.status.is_terminal:
            log("commit", task_id, f"{record.status.value} {time.time():.3f}")
        elif transition.outcome is Outcome.APPLIED and record.retry_at is not None:
            log("retry", task_id, f"{record.last_updated_at} {record.retry_at}")
        return transition

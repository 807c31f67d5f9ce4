"""Re-sealing every task of a store under the first key (``mcp-tasks rekey``).

The store must offer :class:`~mcp_tasks.stores.abilities.Rewrites`: it rewrites one task
at a time with a compare-and-set, so a server writing beside the pass never loses a write
(a task it changed between the read and the write is read and re-sealed again). A pass
writes only tasks that hold something not sealed under the first key, so running it again
after an interruption resumes it: what the first run finished costs a read and no write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from mcp_tasks.stores.encrypted import reseal, sealed_under
from mcp_tasks.stores.observed import unobserved

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.stores.abilities import Rewrites
    from mcp_tasks.stores.encrypted import Keyring

__all__ = ["RekeyProgress", "rekey"]


@dataclass
class RekeyProgress:
    """How far a pass is: tasks read, and tasks written (re-sealed)."""

    read: int = 0
    resealed: int = 0


async def rekey(
    store: Rewrites,
    keys: Keyring,
    *,
    batch: int = 100,
    pause_s: float = 0.0,
    on_batch: Callable[[RekeyProgress], None] | None = None,
) -> RekeyProgress:
    """Re-seal every task of ``store`` that holds a part not sealed under ``keys``' first
    key (sealed under another, or not at all), ``batch`` tasks at a time, pausing
    ``pause_s`` between batches so that servers on the store keep their share of it.

    Raises:
        UnknownEncryptionKey: a task is sealed under a key ``keys`` does not hold (nothing
            of it was written; tasks before it are re-sealed).
    """
    store = unobserved(store)  # type: ignore[arg-type,assignment]
    first = keys.sealing_key_id
    progress = RekeyProgress()
    counted: list[str] = [""]  # the last task counted: a lost race reads a task again

    def rewrite(record: TaskRecord) -> TaskRecord | None:
        if sealed_under(record) <= {first}:
            return None
        if counted[0] != record.task_id:
            counted[0] = record.task_id
            progress.resealed += 1
        return reseal(record, keys)

    after: str | None = None
    while True:
        for _ in range(batch):
            after = await store.rewrite_after(after, rewrite)
            if after is None:
                break
            progress.read += 1
        if on_batch is not None:
            on_batch(progress)
        if after is None:
            return progress
        if pause_s > 0:
            await anyio.sleep(pause_s)

"""``update``, ``cancel`` and ``put_status`` for a store that persists the rules' writes by
read-modify-write (a compare-and-set on a row version, a transaction): the store brings
``options`` and ``_modify``; the rules (:mod:`mcp_tasks.domain.rules`) compute each write."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_tasks.domain import rules

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.models import Lease, StatusChange, StoreOptions, Transition
    from mcp_tasks.domain.rules import OwnerArg, Write


class ReadModifyWrite:
    """The three writes of a read-modify-write store, one way for every such backend."""

    options: StoreOptions

    async def _modify(self, task_id: str, compute: Write) -> Transition:
        """Read the task and the store's now, let ``compute`` decide the write, persist it
        atomically (reading again on a lost race)."""
        raise NotImplementedError

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        return await self._modify(task_id, rules.update_write(owner, input_responses))

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        retention = self.options.result_retention_ms
        return await self._modify(task_id, rules.cancel_write(owner, result_retention_ms=retention))

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        write = rules.put_write(
            change,
            result_retention_ms=self.options.result_retention_ms,
            lease=lease,
            expected_revision=expected_revision,
            event_id=event_id,
        )
        return await self._modify(task_id, write)

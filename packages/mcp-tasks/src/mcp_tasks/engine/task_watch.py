"""``subscriptions/listen`` for tasks: which ``taskIds`` a stream watches, and the
``notifications/tasks`` it carries (each the task's full state, as ``tasks/get`` renders it).

Choices the spec leaves open (docs/serving-tasks.md, "Status notifications"): at most
:data:`MAX_LISTEN_TASK_IDS` ids per request; unknown, expired and foreign ids are dropped
from the acknowledgment alike; each watched task's state at the time of the acknowledgment
is sent first; a task that expires while watched is dropped silently; the watch ends once
every watched task is terminal (or gone), right after the last terminal notification.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from mcp_tasks.domain.errors import StoreUnavailable, TaskNotFound
from mcp_tasks.engine import errors
from mcp_tasks.engine.core import LISTEN_WORK, could_be_task_id
from mcp_tasks.engine.wire import detailed_task
from mcp_tasks.runtime.notifier import POLL_FALLBACK_S, signal_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.engine.core import TaskEngine
    from mcp_tasks.engine.request_view import RequestView
    from mcp_tasks.runtime.notifier import Subscription

#: The most task ids one listen request may name (the spec sets no limit).
MAX_LISTEN_TASK_IDS: Final = 1000

TASKS_NOTIFICATION: Final = "notifications/tasks"


def requested_task_ids(request: RequestView, notifications: Mapping[str, Any]) -> list[str] | None:
    """The ``taskIds`` a listen request asks for, in order without repeats; ``None`` when it
    names none (the key is absent: the SDK serves the request alone).

    Raises:
        MCPError: -32021 when the request does not declare the extension (HTTP 400);
            -32602 when ``taskIds`` is not an array of strings or names more than
            :data:`MAX_LISTEN_TASK_IDS` tasks.
    """
    if "taskIds" not in notifications:
        return None
    if not request.declares_tasks:
        raise errors.missing_capability()
    raw = notifications["taskIds"]
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        raise errors.invalid_params("notifications.taskIds must be an array of task ids")
    if len(raw) > MAX_LISTEN_TASK_IDS:
        raise errors.invalid_params(
            f"notifications.taskIds may name at most {MAX_LISTEN_TASK_IDS} tasks"
        )
    return list(dict.fromkeys(raw))


def _comparable(body: JSONObject) -> JSONObject:
    # The poll hint changes with the task's age alone: no reason to notify.
    return {k: v for k, v in body.items() if k != "pollIntervalMs"}


class TaskWatch:
    """The tasks one listen stream watches: :attr:`task_ids` is what the acknowledgment
    lists; :meth:`notifications` yields each change until every one is terminal."""

    def __init__(self, engine: TaskEngine, owner: str | None, changes: Subscription | None):
        self._engine = engine
        self._owner = owner
        self._changes = changes
        self._records: dict[str, TaskRecord] = {}
        self._sent: dict[str, JSONObject] = {}

    @property
    def task_ids(self) -> list[str]:
        return list(self._records)

    async def _read(self, task_id: str) -> TaskRecord | None:
        """The task's record; ``None`` when it is gone.

        Raises:
            StoreUnavailable: the store did not answer (said once in the outage log).
        """
        outage = self._engine.outages[LISTEN_WORK]
        try:
            record = await self._engine.store.get(task_id, self._owner)
        except TaskNotFound:
            record = None
        except StoreUnavailable as exc:
            outage.failed(exc)
            raise
        outage.recovered()
        return record

    async def load(self, task_ids: list[str]) -> None:
        """Keep the caller's own tasks among ``task_ids``.

        Raises:
            MCPError: -32603 "Task store unavailable": the store did not answer.
        """
        for task_id in task_ids:
            # Foreign, unknown and expired ids are dropped alike: no id is confirmed to a
            # caller that does not own it.
            try:
                record = await self._read(task_id) if could_be_task_id(task_id) else None
            except StoreUnavailable as exc:
                raise errors.to_jsonrpc_error(exc) from None
            if record is not None:
                self._records[task_id] = record

    def _changed(self, task_id: str, record: TaskRecord) -> JSONObject | None:
        body = detailed_task(record, self._engine.clock())
        if self._sent.get(task_id) == _comparable(body):
            return None
        self._sent[task_id] = _comparable(body)
        return body

    def _wait_s(self, live: Mapping[str, str], unread: bool) -> float:
        """How long to wait for a signal before reading every live task all the same: the
        subscription's fallback (forever while no signal can be lost), the poll while a
        read failed, and at most until the first live task expires (no signal says so)."""
        assert self._changes is not None
        wait_s = POLL_FALLBACK_S if unread else self._changes.fallback_s
        expiries = [
            expires_at
            for task_id in live.values()
            if (expires_at := self._records[task_id].expires_at) is not None
        ]
        if expiries:
            until_s = (min(expiries) - self._engine.clock()) / 1000
            # Past it while the store still has the task: its clock says otherwise; poll.
            wait_s = min(wait_s, until_s if until_s > 0 else POLL_FALLBACK_S)
        return wait_s

    async def notifications(self) -> AsyncIterator[JSONObject]:
        """Each watched task's state now, then each change (status, ``statusMessage``,
        input requests, result, error) as a ``DetailedTask``; ends when none is live. A
        store that does not answer ends nothing: the tasks are read again at the next
        change or poll, and the latest state is sent once it is back."""
        live: dict[str, str] = {}
        for task_id, record in self._records.items():
            body = self._changed(task_id, record)
            if body is not None:
                yield body
            if not record.status.is_terminal:
                live[signal_key(task_id)] = task_id
        unread = False  # a read failed: poll until every task is read again
        while live and self._changes is not None:
            changed = await self._changes.wait(self._wait_s(live, unread))
            keys = self._changes.take_changed() if changed else None
            targets = (
                list(live.items()) if keys is None else [(k, live[k]) for k in keys if k in live]
            )
            unread = False
            for key, task_id in targets:
                try:
                    current = await self._read(task_id)
                except StoreUnavailable:
                    unread = True  # read again at the next change or poll (POLL_FALLBACK_S)
                    continue
                if current is None:  # expired while watched
                    del live[key]
                    continue
                self._records[task_id] = current
                body = self._changed(task_id, current)
                if body is not None:
                    yield body
                if current.status.is_terminal:
                    del live[key]


@asynccontextmanager
async def watch_tasks(
    engine: TaskEngine, request: RequestView, task_ids: list[str]
) -> AsyncIterator[TaskWatch]:
    """Watch the caller's tasks among ``task_ids`` (none when notifications are off), in
    one of the engine's listen slots (:class:`~mcp_tasks.engine.listen_slots.ListenSlots`).

    Raises:
        MCPError: -32603 "Subscription limit reached": no listen slot is left.
    """
    with engine.listen_slots.taken(request.owner):
        if not task_ids or not engine.notifications_enabled:
            yield TaskWatch(engine, request.owner, None)
            return
        # Subscribed before the first read, so a change between the read and the first
        # wait is not missed.
        async with engine.notifier.subscribe(*task_ids) as changes:
            watch = TaskWatch(engine, request.owner, changes)
            await watch.load(task_ids)
            yield watch

"""The in-process runner: runs task bodies under a lifespan-owned task group, never in a request.

A body runs outside the request's cancel scope (the SDK's HTTP path cancels a request by
closing its stream). The runner claims each task by id right after it is created, renews
the lease while the body runs, stops the body when the task is cancelled or the lease is
lost, and records the body's outcome with its lease.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc

from mcp_tasks.domain.errors import MCPTasksError, StaleLease, TaskNotFound
from mcp_tasks.domain.ids import redact
from mcp_tasks.domain.models import Claimed, Complete, Fail, StatusChange, WorkSpec
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.context import RunningTaskContext, TaskCancelled
from mcp_tasks.runtime.logs import log_failure

if TYPE_CHECKING:
    from mcp_tasks.runtime.notifier import Notifier, Subscription
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

Body = Callable[[RunningTaskContext], Awaitable[StatusChange]]
"""A task body: runs the work with its context and says how the task ends."""

DEFAULT_LEASE_MS: Final = 30_000
DEFAULT_REAP_INTERVAL_S: Final = 30.0


def tool_work(
    name: str, arguments: Mapping[str, Any], input_responses: Mapping[str, Any] | None = None
) -> WorkSpec:
    """The work descriptor of a tool call: everything its body needs to run again from the
    record alone, on any node: the arguments and the answers to input rounds resolved
    before the task existed (answers given later are on the record itself).

    Raises:
        NotJSONSafe: the arguments or answers are not JSON.
    """
    return WorkSpec(
        type=name,
        input={"arguments": dict(arguments), "inputResponses": dict(input_responses or {})},
    )


def work_input(work: WorkSpec | None) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``(arguments, input_responses)`` of a :func:`tool_work` descriptor (empty for others)."""
    raw = work.input if work is not None else None
    if not isinstance(raw, Mapping):
        return {}, {}
    arguments, answers = raw.get("arguments"), raw.get("inputResponses")
    return (
        arguments if isinstance(arguments, Mapping) else {},
        answers if isinstance(answers, Mapping) else {},
    )


class RunnerNotStarted(MCPTasksError):
    """The task runner is not running: enter Tasks.lifespan (see the adapters' docs)."""


class Runner:
    """Runs task bodies in this process; one per :class:`~mcp_tasks.tasks.Tasks`."""

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        *,
        worker_id: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        reap_interval_s: float | None = DEFAULT_REAP_INTERVAL_S,
    ) -> None:
        self.store = store
        self.notifier = notifier
        self.worker_id = worker_id or f"inproc-{secrets.token_hex(4)}"
        self.lease_ms = lease_ms
        self.reap_interval_s = reap_interval_s
        self._group: anyio.abc.TaskGroup | None = None
        self._depth = 0

    def __repr__(self) -> str:
        return f"Runner(worker_id={self.worker_id!r}, running={self.running})"

    @property
    def running(self) -> bool:
        return self._group is not None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Own the task group while the server lives. Re-entering is a no-op, so the same
        lifespan may be composed at two levels (e.g. Starlette and MCPServer)."""
        if self._group is not None:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        async with anyio.create_task_group() as group:
            self._group = group
            if self.reap_interval_s is not None:
                group.start_soon(self._reap_forever, self.reap_interval_s)
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def start(self, task_id: str, body: Body) -> None:
        """Claim the task and run ``body`` in the background.

        The body's context takes its arguments, earlier answers and the client's
        capabilities from the claimed record (:func:`tool_work`,
        ``TaskRecord.client_capabilities``), never from a request, so a body claimed again
        (after a restart, by another runner) sees exactly what the first run saw, and every
        input request it makes is checked against the same capabilities.

        Raises:
            RunnerNotStarted: no lifespan is running.
        """
        group = self._group
        if group is None:
            raise RunnerNotStarted
        claimed = await self.store.claim(self.worker_id, lease_ms=self.lease_ms, task_id=task_id)
        if claimed is None:  # cancelled (or reaped) between create and claim: nothing to run
            logger.debug("task %s was not claimable", redact(task_id))
            return
        arguments, input_responses = work_input(claimed.record.work)
        context = RunningTaskContext(
            task_id=task_id,
            store=self.store,
            notifier=self.notifier,
            lease=claimed.lease,
            arguments=arguments,
            input_responses=input_responses,
            client_capabilities=claimed.record.client_capabilities,
        )
        group.start_soon(self._run, claimed, context, body)

    async def _run(self, claimed: Claimed, context: RunningTaskContext, body: Body) -> None:
        task_id = claimed.record.task_id
        try:
            change: StatusChange | None = None
            async with self.notifier.subscribe(task_id) as changes, anyio.create_task_group() as tg:
                body_scope = anyio.CancelScope()
                tg.start_soon(self._watch, context, changes, body_scope)
                with body_scope:
                    change = await self._outcome(context, body)
                tg.cancel_scope.cancel()
            if change is not None and not context.cancelled:
                await self.store.put_status(task_id, change, lease=context.lease)
                await self.notifier.publish(task_id)
        except (StaleLease, TaskNotFound):
            logger.debug("task %s ended elsewhere; outcome dropped", redact(task_id))
        except MCPTasksError as exc:
            log_failure(logger, "recording a task outcome failed", exc, task_id)
        finally:
            # Also on shutdown: a released task is claimable by another node at once.
            with anyio.CancelScope(shield=True):
                try:
                    await self.store.release(context.lease)
                except MCPTasksError:
                    logger.debug("releasing the lease of task %s failed", redact(task_id))

    @staticmethod
    async def _outcome(context: RunningTaskContext, body: Body) -> StatusChange | None:
        token = context.bind()
        try:
            return await body(context)
        except TaskCancelled:
            return None
        except Exception:
            logger.exception("a task body raised")
            return Fail({"code": -32603, "message": "Internal error"})
        finally:
            context.unbind(token)

    async def _watch(
        self, context: RunningTaskContext, changes: Subscription, body_scope: anyio.CancelScope
    ) -> None:
        """Renew the lease; stop the body once the task is terminal, gone or not ours."""
        renew_every = self.lease_ms / 3000
        task_id = context.task_id
        renew_at = anyio.current_time() + renew_every
        while True:
            # Signals (progress, answers, a cancel) must not postpone the renewal.
            changed = await changes.wait(max(0.0, renew_at - anyio.current_time()))
            try:
                if anyio.current_time() >= renew_at:
                    context.lease = await self.store.renew(context.lease, lease_ms=self.lease_ms)
                    renew_at = anyio.current_time() + renew_every
                if not changed:
                    continue
                record = await self.store.get(task_id, ANY_OWNER)
                if not record.status.is_terminal:
                    continue
            except (StaleLease, TaskNotFound):
                pass
            except MCPTasksError:
                logger.warning("the task store did not answer; will retry")
                continue
            logger.debug("stopping the body of task %s", redact(task_id))
            context.mark_cancelled()
            body_scope.cancel()
            return

    async def _reap_forever(self, interval_s: float) -> None:
        while True:
            await anyio.sleep(interval_s)
            try:
                removed = await self.store.reap()
            except MCPTasksError:
                logger.warning("reaping expired tasks failed; will retry")
                continue
            if removed:
                logger.info("reaped %d expired tasks", removed)


def complete_from(result: Mapping[str, Any]) -> Complete:
    """A ``Complete`` change for a tool result mapping."""
    return Complete(dict(result))

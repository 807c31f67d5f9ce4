"""The runner's watcher: one loop keeps every running body's lease and stops a body whose
task ended, was taken over or lost its lease, for all the bodies of a runner at once.

A body costs the watcher an entry and a place in its timetable, not a task of its own: the
loop sleeps until the next renewal, fallback check or lease end is due, or until a body's
subscription is signalled, and starts a store call only for the body that needs one (a
renewal, a check), so one slow call holds up no other body's watch.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc

from mcp_tasks.domain.errors import MCPTasksError, StaleLease, TaskNotFound
from mcp_tasks.domain.ids import redact
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.notifier import POLL_FALLBACK_S
from mcp_tasks.telemetry import Untraced

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_tasks.runtime.context import RunningTaskContext
    from mcp_tasks.runtime.logs import Outage
    from mcp_tasks.runtime.notifier import Subscription
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

#: How soon a failed lease renewal is tried again (at most a heartbeat).
RENEW_RETRY_S: Final = 1.0


class Watched:
    """One running body as the watcher keeps it: when its lease is renewed and its task
    read next, whether a signal came, and the store call under way for it, if any."""

    __slots__ = (
        "again",
        "body_scope",
        "call",
        "call_done",
        "changes",
        "check_at",
        "context",
        "due",
        "ended",
        "renew_at",
        "signalled",
    )

    def __init__(
        self,
        context: RunningTaskContext,
        changes: Subscription,
        body_scope: anyio.CancelScope,
        renew_at: float,
    ) -> None:
        self.context = context
        self.changes = changes
        self.body_scope = body_scope
        self.renew_at = renew_at
        self.check_at = anyio.current_time() + changes.fallback_s
        self.due = math.inf  # when it is next in the timetable
        self.signalled = False  # a change was signalled since its last check
        self.again = False  # signalled during a store call: check once more after it
        self.ended = False  # the body ended: nothing more is done for it
        self.call: anyio.CancelScope | None = None  # the store call under way
        self.call_done: anyio.Event | None = None

    def next_due(self) -> float:
        return min(self.renew_at, self.check_at, self.context.lease_lapses_at)


class Watcher:
    """Renews the lease of every body a runner runs on the heartbeat, and stops a body at
    once when its task is terminal, gone or taken over by another worker: when its
    subscription is signalled, and at the latest every :attr:`Subscription.fallback_s`
    (a signal lost or never sent; forever while none can be lost). A failed renewal is
    tried again after :data:`RENEW_RETRY_S` (or the heartbeat, if shorter), not back to
    back; a store outage is said once (``outage``). A progress report the store was away
    for is sent again at each renewal or check until it is taken. Once the lease has run
    out for certain (the store was away longer than it), the body stops: the task is
    another's. These store calls are measured, not traced: a long run would gather a span
    every few seconds."""

    def __init__(
        self,
        store: Callable[[], Store],
        *,
        lease_ms: int,
        heartbeat_ms: int,
        outage: Callable[[], Outage],
        lease_ran_out: Callable[[RunningTaskContext, str], None],
    ) -> None:
        self._store = store
        self._lease_ms = lease_ms
        self._renew_every = heartbeat_ms / 1000
        self._outage = outage
        self._lease_ran_out = lease_ran_out
        self._timetable: list[tuple[float, int, Watched]] = []
        self._order = itertools.count()  # ties in the timetable: first come, first served
        self._signalled: list[Watched] = []
        self._wake = anyio.Event()
        self._sleeping_until = math.inf
        self._group: anyio.abc.TaskGroup | None = None

    def watch(
        self, context: RunningTaskContext, changes: Subscription, body_scope: anyio.CancelScope
    ) -> Watched:
        """Start watching a body: ``changes`` is its task's subscription (each signal asks
        for a check), ``body_scope`` what a stop cancels."""
        watched = Watched(context, changes, body_scope, anyio.current_time() + self._renew_every)
        changes.on_signal(lambda: self._signal(watched))
        self._schedule(watched)
        return watched

    async def unwatch(self, watched: Watched) -> None:
        """The body ended: stop watching it; a store call under way for it is cancelled
        and waited for (it changes nothing for the run any more)."""
        watched.ended = True
        if watched.call is not None and watched.call_done is not None:
            watched.call.cancel()
            with anyio.CancelScope(shield=True):
                await watched.call_done.wait()

    async def run(self) -> None:
        """The loop, until cancelled (the runner's stop)."""
        with Untraced():
            async with anyio.create_task_group() as group:
                self._group = group
                try:
                    await self._loop(group)
                finally:
                    self._group = None

    async def _loop(self, group: anyio.abc.TaskGroup) -> None:
        timetable = self._timetable
        while True:
            now = anyio.current_time()
            signalled, self._signalled = self._signalled, []
            for watched in signalled:
                self._dispatch(group, watched)
            while timetable and timetable[0][0] <= now:
                due, _, watched = heapq.heappop(timetable)
                if due == watched.due:  # else moved since, or ended
                    watched.due = math.inf
                    self._dispatch(group, watched)
            if self._signalled:
                continue
            self._sleeping_until = timetable[0][0] if timetable else math.inf
            with anyio.move_on_after(self._sleeping_until - now):
                await self._wake.wait()
            self._sleeping_until = -math.inf  # awake: nothing needs to wake it
            self._wake = anyio.Event()

    def _signal(self, watched: Watched) -> None:
        if watched.ended:
            return
        if watched.call is not None:
            watched.again = True
            return
        if not watched.signalled:
            watched.signalled = True
            self._signalled.append(watched)
            self._wake.set()

    def _schedule(self, watched: Watched) -> None:
        if watched.ended:
            return
        due = watched.next_due()
        if due == watched.due:
            return
        watched.due = due
        heapq.heappush(self._timetable, (due, next(self._order), watched))
        if due < self._sleeping_until:
            self._wake.set()

    def _dispatch(self, group: anyio.abc.TaskGroup, watched: Watched) -> None:
        if watched.ended or watched.call is not None:
            return
        changed, watched.signalled = watched.signalled, False
        now = anyio.current_time()
        if not changed and now < watched.next_due():
            self._schedule(watched)  # woken early (a signal taken since): not due yet
            return
        watched.call, watched.call_done = anyio.CancelScope(), anyio.Event()
        group.start_soon(self._check, watched, changed)

    async def _check(self, watched: Watched, changed: bool) -> None:
        call, done = watched.call, watched.call_done
        assert call is not None
        assert done is not None
        try:
            with call:
                if await self._keep(watched, changed) or watched.ended:
                    return
                watched.context.mark_cancelled()
                watched.body_scope.cancel()
        finally:
            watched.call = watched.call_done = None
            done.set()
            if watched.again and not watched.ended:
                watched.again = False
                watched.signalled = True
                self._signalled.append(watched)
                self._wake.set()
            else:
                self._schedule(watched)

    async def _keep(self, watched: Watched, changed: bool) -> bool:
        """Renew and check what is due for ``watched``; whether its body goes on."""
        context = watched.context
        if anyio.current_time() >= context.lease_lapses_at:
            self._lease_ran_out(context, "its body is stopped")
            return False
        store = self._store()
        try:
            if anyio.current_time() >= watched.renew_at:
                lease = await store.renew(context.lease, lease_ms=self._lease_ms)
                context.renewed(lease, self._lease_ms)
                watched.renew_at = anyio.current_time() + self._renew_every
                self._outage().recovered()
            # A progress report the store was away for is tried again at each renewal too:
            # no signal asks for the check that sends it while the relay listens.
            unsent = context.unsent_progress is not None
            if not changed and not unsent and anyio.current_time() < watched.check_at:
                return True
            watched.check_at = anyio.current_time() + watched.changes.fallback_s
            if context.unsent_progress is not None:
                await context.send_unsent()
            record = await store.get(context.task_id, ANY_OWNER)
            if not record.status.is_terminal and record.generation == context.lease.generation:
                self._outage().recovered()
                return True
        except (StaleLease, TaskNotFound):
            pass
        except MCPTasksError as exc:
            self._outage().failed(exc)
            now = anyio.current_time()
            # The check may not have been made: poll until it is (no signal asks again).
            watched.check_at = min(watched.check_at, now + POLL_FALLBACK_S)
            if watched.renew_at <= now:  # the renewal failed: try again soon, not back to back
                watched.renew_at = now + min(self._renew_every, RENEW_RETRY_S)
            return True
        logger.debug("stopping the body of task %s", redact(context.task_id))
        return False

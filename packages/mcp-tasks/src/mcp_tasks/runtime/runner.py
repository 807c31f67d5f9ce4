"""The runner: runs task bodies under a lifespan-owned task group, never in a request.

A body runs outside the request's cancel scope (the SDK's HTTP path cancels a request by
closing its stream). A task is created already claimed by the runner of the process that
creates it (S-CREATE.6); the runner renews the lease on a heartbeat, stops the body when
the task is cancelled or the lease is lost, and records the body's outcome with its lease.

Work outlives its process: the recovery loop claims tasks whose lease ran out or was
released (a crashed or stopped process, a retry that is due) and runs them again through
the executor registered for their tool (:attr:`Runner.executors`). A body may therefore run
more than once; its outcome is committed once (docs/serving-tasks.md, "Durable execution").
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import anyio
import anyio.abc

from mcp_tasks.domain.errors import (
    InvalidArgument,
    MCPTasksError,
    StaleLease,
    StoreUnavailable,
    TaskNotFound,
)
from mcp_tasks.domain.ids import redact
from mcp_tasks.domain.models import (
    Claimed,
    Complete,
    Fail,
    NewTask,
    Outcome,
    Retry,
    StatusChange,
    TaskRecord,
    Transition,
    WorkSpec,
)
from mcp_tasks.domain.rules import interrupted, lease_of
from mcp_tasks.runtime.context import (
    STORE_RETRY_S,
    RetryRequested,
    RunningTaskContext,
    TaskCancelled,
)
from mcp_tasks.runtime.logs import Outage, cause_of, log_failure
from mcp_tasks.runtime.notifier import WORK_SIGNAL
from mcp_tasks.runtime.watcher import Watcher
from mcp_tasks.stores.observed import backend_name, observed
from mcp_tasks.stores.opening import describe_store
from mcp_tasks.telemetry import (
    ATTEMPT,
    OUTCOME,
    STORE,
    SpanScope,
    Untraced,
    context_of,
    count_end,
    fresh_trace,
    instruments,
    links_to,
    tool_attributes,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.runtime.notifier import Notifier
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

Body = Callable[[RunningTaskContext], Awaitable[StatusChange]]
"""A task body: runs the work with its context and says how the task ends. Registered by
tool name (:attr:`Runner.executors`) it is an *executor*: it can run any task of that tool
again from the task's record alone."""

Resolver = Callable[[str], Awaitable["Body | None"]]
"""Finds the executor of a tool by name when none is registered (e.g. a FastMCP server's
tools, looked up when a task of theirs is recovered)."""

Lister = Callable[[], Awaitable["frozenset[str]"]]
"""Names the tools a resolver finds (a FastMCP server's task tools): with the registered
executors, the work types the runner claims (S-CLAIM.4)."""

Create = Callable[[NewTask], Awaitable[TaskRecord]]
"""Writes a new task (``Store.create``, or a caller's wrapper of it) and returns its record."""

Recovery: TypeAlias = Literal["rerun", "fail"]
"""What a runner does with a task of a tool whose run was interrupted (its process died or
stopped mid-body): ``"rerun"`` runs the body again (at least once), ``"fail"`` ends the task
``failed`` with :data:`INTERRUPTED_ERROR` instead, for a body that must not run twice."""
RECOVERIES: Final = ("rerun", "fail")

DEFAULT_LEASE_MS: Final = 30_000
DEFAULT_HEARTBEAT_MS: Final = 10_000
DEFAULT_RECOVERY_INTERVAL_S: Final = 1.0
DEFAULT_MAX_ADOPTED: Final = 64
DEFAULT_REAP_INTERVAL_S: Final = 30.0
#: The least time between two claims the notifier's work signal triggers.
MIN_CLAIM_GAP_S: Final = 0.05

#: What a task that no process here can run again ends with (logged with the tool's name).
NO_EXECUTOR_ERROR: Final[JSONObject] = {
    "code": -32603,
    "message": "The task was interrupted and its tool cannot be run again on this server",
}
#: What an interrupted task of a tool that is not re-run (``recovery="fail"``) ends with.
INTERRUPTED_ERROR: Final[JSONObject] = {
    "code": -32603,
    "message": "The task was interrupted; this tool is not re-run",
}
#: What a task created while this runner stopped ends with.
NOT_RUNNING_ERROR: Final[JSONObject] = {"code": -32603, "message": "The task runner is not running"}


def tool_work(
    name: str,
    arguments: Mapping[str, Any],
    input_responses: Mapping[str, Any] | None = None,
    *,
    task_id: str | None = None,
    retry_delays_ms: tuple[int, ...] = (),
    trace_context: Mapping[str, str] | None = None,
) -> WorkSpec:
    """The work descriptor of a tool call: everything its body needs to run again from the
    record alone, on any node: the tool's name, the arguments, the answers to input rounds
    resolved before the task existed (answers given later are on the record itself), the
    retry delays, the idempotency key (the task id) and the creating request's trace
    context. The client's capabilities and the owner are fields of the record itself.

    Raises:
        NotJSONSafe: the arguments or answers are not JSON.
    """
    return WorkSpec(
        type=name,
        input={"arguments": dict(arguments), "inputResponses": dict(input_responses or {})},
        idempotency_key=task_id,
        retry_delays_ms=retry_delays_ms,
        trace_context=trace_context or {},
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


@dataclass(frozen=True, kw_only=True)
class RunnerOptions:
    """How this process runs task bodies: ``Tasks(runner=RunnerOptions(lease_ms=...))``.

    ``lease_ms`` is how long a claim lives without renewal (how soon another process takes
    over a task whose process died); ``heartbeat_ms`` how often a running body's lease is
    renewed (less than the lease; ``None``: a third of it, at most 10 s).
    ``recovery_interval_s`` is how often the recovery loop looks for work nobody holds when
    it found none (``None``: no recovery loop, e.g. a process that only creates tasks); it
    keeps at most ``max_adopted`` adopted bodies running at once. ``reap_interval_s``: how
    often expired tasks are deleted (``None``: never here). ``run_tasks=False``: this
    process runs no body at all; it creates tasks unclaimed for workers (``mcp-tasks
    worker``) to run, and only reaps. ``worker_id`` names this process in leases
    (``None``: ``inproc-`` and a random suffix).

    Raises:
        InvalidArgument: a value out of range (checked when the options are built).
    """

    worker_id: str | None = None
    lease_ms: int = DEFAULT_LEASE_MS
    heartbeat_ms: int | None = None
    recovery_interval_s: float | None = DEFAULT_RECOVERY_INTERVAL_S
    max_adopted: int = DEFAULT_MAX_ADOPTED
    reap_interval_s: float | None = DEFAULT_REAP_INTERVAL_S
    run_tasks: bool = True

    def __post_init__(self) -> None:
        lease_ms = self.lease_ms
        if isinstance(lease_ms, bool) or not isinstance(lease_ms, int) or lease_ms <= 0:
            raise InvalidArgument("lease_ms must be a positive integer")
        heartbeat_ms = self.renew_every_ms
        if (
            isinstance(heartbeat_ms, bool)
            or not isinstance(heartbeat_ms, int)
            or not 0 < heartbeat_ms < lease_ms
        ):
            raise InvalidArgument("heartbeat_ms must be a positive integer below lease_ms")
        if self.recovery_interval_s is not None and not self.recovery_interval_s > 0:
            raise InvalidArgument("recovery_interval_s must be positive or None")
        max_adopted = self.max_adopted
        if isinstance(max_adopted, bool) or not isinstance(max_adopted, int) or max_adopted < 1:
            raise InvalidArgument("max_adopted must be a positive integer")

    @property
    def renew_every_ms(self) -> int:
        """The heartbeat: ``heartbeat_ms``, or a third of the lease (at most 10 s)."""
        if self.heartbeat_ms is not None:
            return self.heartbeat_ms
        return max(1, min(DEFAULT_HEARTBEAT_MS, self.lease_ms // 3))

    def for_worker(self) -> RunnerOptions:
        """These options for a process that runs tasks (``mcp-tasks worker``): bodies run,
        and the recovery loop looks for work (every second unless the options say)."""
        return replace(
            self,
            run_tasks=True,
            recovery_interval_s=self.recovery_interval_s or DEFAULT_RECOVERY_INTERVAL_S,
        )


class Runner:
    """Runs task bodies in this process; one per :class:`~mcp_tasks.tasks.Tasks`, as its
    :class:`RunnerOptions` say."""

    def __init__(
        self, store: Store, notifier: Notifier, options: RunnerOptions | None = None
    ) -> None:
        options = options if options is not None else RunnerOptions()
        #: How this runner runs; replaced (not changed) before it starts, if at all.
        self.options = options
        self.notifier = notifier
        self.worker_id = options.worker_id or f"inproc-{secrets.token_hex(4)}"
        #: Tool name → the executor that runs a task of that tool from its record alone.
        self.executors: dict[str, Body] = {}
        #: Asked in order when :attr:`executors` has no entry for a tool.
        self.resolvers: list[Resolver] = []
        #: Name the tools the resolvers find. With a resolver but no lister the runner
        #: cannot know which tools it serves, and claims tasks of any tool.
        self.listers: list[Lister] = []
        #: Tools this process declares without an executor (``Tasks.register`` without
        #: ``run``): their tasks are claimed here too, and fail ("cannot be run again").
        self.declared: set[str] = set()
        #: Tools whose interrupted tasks fail instead of running again (``recovery="fail"``).
        self.not_rerun: set[str] = set()
        self._group: anyio.abc.TaskGroup | None = None
        self._depth = 0
        self.serve_from(store)
        self._adopted = 0
        #: One watch for every body running here (lease renewals, stops).
        self._watcher = Watcher(
            lambda: self.store,
            lease_ms=options.lease_ms,
            heartbeat_ms=options.renew_every_ms,
            outage=lambda: self._watch_outage,
            lease_ran_out=self._lease_ran_out,
        )

    def __repr__(self) -> str:
        return f"Runner(worker_id={self.worker_id!r}, running={self.running})"

    @property
    def store(self) -> Store:
        """The store, observed (:mod:`mcp_tasks.stores.observed`): each operation a span."""
        return self._store

    def serve_from(self, store: Store) -> None:
        """Run tasks from ``store`` (observed unless it is already; ``Tasks`` hands the one
        it observed): before the runner starts (``Tasks.use_store``)."""
        self._store = observed(store)
        self._backend = backend_name(store)
        #: Shared by every running body's watch: one store outage is one story in the log,
        #: naming the store in use.
        self._watch_outage = Outage(logger, "keeping running tasks' leases", describe_store(store))

    @property
    def running(self) -> bool:
        return self._group is not None

    async def executor_for(self, tool: str) -> Body | None:
        """The executor of ``tool``: registered, or found by a resolver; ``None`` if neither."""
        found = self.executors.get(tool)
        for resolve in self.resolvers:
            if found is not None:
                break
            found = await resolve(tool)
        return found

    async def work_types(self) -> frozenset[str] | None:
        """The tools whose tasks this runner claims (S-CLAIM.4): those with a registered
        executor, those its listers name and those it declares; ``None`` (any tool) when a
        resolver has no lister. A task of another tool waits for a process that serves it."""
        if self.resolvers and not self.listers:
            return None
        served = frozenset(self.executors) | self.declared
        for lister in self.listers:
            served |= await lister()
        return served

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Own the task group while the server lives. Re-entering is a no-op, so the same
        lifespan may be composed at two levels (e.g. Starlette and MCPServer).

        On exit every body is cancelled and its lease released at once, so another process
        takes the work over without waiting for the lease to run out."""
        if self._group is not None:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._watcher.run)
            if self.options.reap_interval_s is not None:
                group.start_soon(self._reap_forever, self.options.reap_interval_s)
            if self.options.run_tasks and self.options.recovery_interval_s is not None:
                group.start_soon(self._recover_forever, self.options.recovery_interval_s)
            elif not self.options.run_tasks:
                logger.info("running no tasks: workers on the store run them")
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def create_and_run(self, task: NewTask, body: Body, create: Create) -> TaskRecord:
        """Create ``task`` through ``create`` (``Store.create``, or a caller's wrapper of it)
        claimed by this runner, and run ``body`` for it under the lease the create took; the
        created record is returned. Claimed at creation (S-CREATE.6), no other process can
        take the task before its first run, and if this process dies the claim runs out and
        any process runs it again. ``run_tasks=False``: the task is created unclaimed and
        the workers are woken (:data:`WORK_SIGNAL`); ``body`` does not run here.

        The body's context takes its arguments, earlier answers and the client's
        capabilities from the record (:func:`tool_work`, ``TaskRecord.client_capabilities``),
        never from a request, so a body run again (after a restart, by another runner) sees
        exactly what the first run saw, and every input request it makes is checked against
        the same capabilities.

        Raises:
            RunnerNotStarted: no lifespan is running (nothing is created), or the runner
                stopped while the task was being created (the task is failed: nothing here
                would run it).
        """
        if not self.running:
            raise RunnerNotStarted
        if not self.options.run_tasks:
            record = await create(task)
            await self.notifier.publish(WORK_SIGNAL)
            return record
        record = await create(task.claimed(self.worker_id, self.options.lease_ms))
        claimed = Claimed(record, lease_of(record))
        group = self._group
        if group is None:  # stopped while the task was being created
            await self._fail(claimed, NOT_RUNNING_ERROR)
            raise RunnerNotStarted
        group.start_soon(self._run, claimed, body, False)
        return record

    async def start(self, task_id: str, body: Body) -> None:
        """Claim an existing task by id and run ``body`` in the background (a task created
        unclaimed; the engine creates its tasks claimed, with :meth:`create_and_run`).

        Raises:
            RunnerNotStarted: no lifespan is running.
        """
        group = self._group
        if group is None:
            raise RunnerNotStarted
        claimed = await self.store.claim(
            self.worker_id, lease_ms=self.options.lease_ms, task_id=task_id
        )
        if claimed is None:  # cancelled, reaped or taken between create and claim
            logger.debug("task %s was not claimable", redact(task_id))
            return
        group.start_soon(self._run, claimed, body, False)

    # --- adopting work nobody holds -------------------------------------------------

    async def _recover_forever(self, interval_s: float) -> None:
        """Claim work with no live lease (oldest first) and run it through its executor.
        Claims back to back while there is work and room; otherwise waits ``interval_s``, or
        less when any process signals work (a task created for workers, a lease released).

        Ends once the runner stopped: a claim then is only released again, and the runner's
        own releases at its stop make work claimable at once. A store may shield its calls
        from cancellation (MongoDB's never cancels PyMongo), so the stop's cancellation may
        find no await of this loop outside a store call to land on; claiming on after the
        stop, it would take and release the same tasks forever."""
        outage = Outage(logger, "claiming unheld tasks", describe_store(self.store))
        served = await self.work_types()
        logger.info(
            "running the tasks of %s",
            "every tool" if served is None else f"tools: {', '.join(sorted(served)) or 'none'}",
            extra={"tools": None if served is None else sorted(served)},
        )
        async with self.notifier.subscribe(WORK_SIGNAL) as work:
            while self.running:
                claimed: Claimed | None = None
                if self._adopted < self.options.max_adopted:
                    try:
                        with Untraced():  # a poll: the run of what it claims is traced
                            claimed = await self.store.claim(
                                self.worker_id,
                                lease_ms=self.options.lease_ms,
                                work_types=await self.work_types(),
                            )
                    except MCPTasksError as exc:
                        outage.failed(exc)
                    else:
                        outage.recovered()
                if claimed is None:
                    tried_at = anyio.current_time()
                    if await work.wait(interval_s):
                        # A claim can take a write lock (SQLite), and a store whose signals
                        # say only "something changed" wakes this on every write: at most
                        # one signalled claim per MIN_CLAIM_GAP_S.
                        await anyio.sleep(
                            max(0.0, tried_at + MIN_CLAIM_GAP_S - anyio.current_time())
                        )
                    continue
                await self._adopt(claimed)

    async def _claim_when_due(self, task_id: str, delay_ms: int) -> None:
        """Run a retry of a task this runner ran, when its delay is over (the recovery loop
        of any process would find it too, up to its interval later)."""
        await anyio.sleep(delay_ms / 1000)
        try:
            claimed = await self.store.claim(
                self.worker_id, lease_ms=self.options.lease_ms, task_id=task_id
            )
        except MCPTasksError:
            return  # the recovery loop will find it
        if claimed is not None:
            await self._adopt(claimed)

    async def _adopt(self, claimed: Claimed) -> None:
        """Run a claimed task through its tool's executor; a task no executor here can run
        fails at once (waiting would hold it forever: every claim extends its life)."""
        group = self._group
        record = claimed.record
        tool = record.work.type if record.work is not None else ""
        try:
            body = await self.executor_for(tool)
        except Exception:
            logger.exception(
                "looking up the executor of tool %r failed", tool, extra={"tool": tool}
            )
            body = None
        if group is None:
            await self._release(claimed)
            return
        if body is None:
            logger.error(
                "task %s of tool %r has no executor here: it fails",
                redact(record.task_id),
                tool,
                extra={"tool": tool, "attempt": record.attempt},
            )
            await self._fail(claimed, NO_EXECUTOR_ERROR)
            await self._release(claimed)
            return
        if tool in self.not_rerun and interrupted(record):
            logger.warning(
                "a task of tool %r was interrupted and this tool is not re-run: it fails",
                tool,
                extra={"tool": tool, "attempt": record.attempt, "store": self._backend},
            )
            await self._fail(claimed, INTERRUPTED_ERROR)
            return
        if interrupted(record):  # a takeover: this attempt's lease ran out or was released
            instruments.recoveries.add(1, tool_attributes(record))
            claimed_at = claimed.lease.expires_at - self.options.lease_ms
            waited_s = max(0, claimed_at - record.last_updated_at) / 1000
            logger.info(
                "resuming a task of tool %r after %.1f s without progress "
                "(generation %d, attempt %d)",
                tool,
                waited_s,
                record.generation,
                record.attempt,
                extra={
                    "tool": tool,
                    "attempt": record.attempt,
                    "waited_s": waited_s,
                    "store": self._backend,
                },
            )
        elif record.attempt > 0:  # a due retry (counted in retries when it was asked for)
            logger.info(
                "starting attempt %d of a task of tool %r (a retry)",
                record.attempt,
                tool,
                extra={"tool": tool, "attempt": record.attempt, "store": self._backend},
            )
        else:
            logger.info(
                "starting a task of tool %r created for workers",
                tool,
                extra={"tool": tool, "attempt": record.attempt, "store": self._backend},
            )
        self._adopted += 1
        group.start_soon(self._run, claimed, body, True)

    # --- running one body ------------------------------------------------------------

    def _context(self, claimed: Claimed) -> RunningTaskContext:
        record = claimed.record
        arguments, input_responses = work_input(record.work)
        return RunningTaskContext(
            task_id=record.task_id,
            store=self.store,
            notifier=self.notifier,
            lease=claimed.lease,
            # Claimed just now: by then the claim has run out for certain unless renewed.
            lease_lapses_at=anyio.current_time() + self.options.lease_ms / 1000,
            arguments=arguments,
            input_responses=input_responses,
            client_capabilities=record.client_capabilities,
            owner=record.owner,
            attempt=record.attempt,
            tool=record.work.type if record.work is not None else None,
        )

    def _run_span(self, claimed: Claimed, adopted: bool) -> SpanScope:
        """The span of one run: in the creating request's trace on its first run here;
        else a trace of its own, linked to the creating one (another process, a crash, a
        retry or a worker's pick-up later)."""
        record = claimed.record
        headers = record.work.trace_context if record.work is not None else None
        attributes = {
            **tool_attributes(record),
            ATTEMPT: record.attempt,
            STORE: self._backend,
        }
        if adopted:
            return SpanScope(
                "mcp_tasks.run", attributes, parent=fresh_trace(), links=links_to(headers)
            )
        return SpanScope("mcp_tasks.run", attributes, parent=context_of(headers))

    def _first_run_delay(self, claimed: Claimed) -> None:
        """Measure how long the task waited for its first run (store clock)."""
        record = claimed.record
        if record.generation == 1:
            claimed_at = claimed.lease.expires_at - self.options.lease_ms
            instruments.first_run_delay.record(
                max(0, claimed_at - record.created_at) / 1000, tool_attributes(record)
            )

    async def _run(self, claimed: Claimed, body: Body, adopted: bool) -> None:
        context = self._context(claimed)
        task_id = claimed.record.task_id
        ended = finished = False
        outcome = "stopped"
        started = time.perf_counter()
        self._first_run_delay(claimed)
        scope = self._run_span(claimed, adopted)
        scope.__enter__()
        try:
            change: StatusChange | None = None
            async with self.notifier.subscribe(task_id) as changes:
                body_scope = anyio.CancelScope()
                context.watch = changes
                watched = self._watcher.watch(context, changes, body_scope)
                try:
                    with body_scope:
                        change = await self._outcome(context, body)
                finally:
                    await self._watcher.unwatch(watched)
            if change is not None and not context.cancelled:
                finished, outcome = await self._record(context, change)
            ended = context.cancelled or isinstance(change, (Complete, Fail))
            if context.cancelled:
                outcome = "cancelled"
        except (StaleLease, TaskNotFound):
            ended = True
            outcome = "ended_elsewhere"
            logger.debug("task %s ended elsewhere; outcome dropped", redact(task_id))
        except MCPTasksError as exc:
            outcome = "not_recorded"
            self._not_recorded(context, exc)
        finally:
            attributes = {**tool_attributes(claimed.record), OUTCOME: outcome}
            instruments.run_duration.record(time.perf_counter() - started, attributes)
            if adopted:
                self._adopted -= 1
            # A finished task keeps its inert claim: no claim, renew or write can use it
            # (S-RENEW, INV-TERMINAL), so releasing it would be one more store write per task.
            # Otherwise, also on shutdown: a released task is claimable elsewhere at once.
            try:
                if not finished:
                    with anyio.CancelScope(shield=True):
                        await self._release(
                            Claimed(claimed.record, context.lease), claimable=not ended
                        )
            finally:
                scope.span.set_attribute(OUTCOME, outcome)
                scope.__exit__(None, None, None)

    async def _record(self, context: RunningTaskContext, change: StatusChange) -> tuple[bool, str]:
        """Write the body's outcome; whether the task is now terminal in the store, and how
        the run ended (its status, ``retry``, or ``superseded`` when the write was not
        applied)."""
        task_id = context.task_id
        transition = await self._write_outcome(context, change)
        await self.notifier.publish(task_id)
        record = transition.record
        if transition.outcome is Outcome.UNCHANGED:
            return record.status.is_terminal, "superseded"
        count_end(record)
        logger.debug(
            "task %s: outcome recorded (%s, generation %d)",
            redact(task_id),
            record.status.value,
            record.generation,
        )
        if record.retry_at is not None:
            # A retry: the claim is released and the task waits its delay (store clock).
            instruments.retries.add(1, tool_attributes(record))
            if self._group is not None:
                delay = max(0, record.retry_at - record.last_updated_at)
                self._group.start_soon(self._claim_when_due, task_id, delay)
            return False, "retry"
        return record.status.is_terminal, record.status.value

    def _not_recorded(self, context: RunningTaskContext, error: MCPTasksError) -> None:
        if isinstance(error, StoreUnavailable):  # away until the lease ran out
            self._lease_ran_out(context, "its outcome was not recorded", error)
        else:
            log_failure(logger, "recording a task outcome failed", error, context.task_id)

    def _lease_ran_out(
        self, context: RunningTaskContext, what: str, error: BaseException | None = None
    ) -> None:
        """Say (one line, no traceback) that a run lost its lease to a store outage."""
        cause = f" ({cause_of(error)})" if error is not None else ""
        logger.warning(
            "a task of tool %r lost its lease: the task store %s was away longer than the "
            "lease%s; %s and the task runs again",
            context.tool,
            describe_store(self.store),
            cause,
            what,
            extra={"tool": context.tool, "store": self._backend},
        )

    async def _write_outcome(self, context: RunningTaskContext, change: StatusChange) -> Transition:
        """Write the body's outcome, sent again while the store is away and the lease may
        hold (a blip loses no outcome). Its event id makes a write whose reply was lost
        answer ``duplicate`` when sent again (S-PUT.2), rather than be refused.

        Raises:
            StoreUnavailable: the store was away until the lease ran out.
        """
        event_id = f"outcome-{context.lease.generation}"
        while True:
            try:
                return await self.store.put_status(
                    context.task_id, change, lease=context.lease, event_id=event_id
                )
            except StoreUnavailable:
                if anyio.current_time() >= context.lease_lapses_at:
                    raise
            await anyio.sleep(STORE_RETRY_S)

    async def _fail(self, claimed: Claimed, error: JSONObject) -> None:
        """End a claimed task ``failed`` with ``error``, before any body ran for it."""
        task_id = claimed.record.task_id
        try:
            transition = await self.store.put_status(task_id, Fail(error), lease=claimed.lease)
            if transition.outcome is Outcome.APPLIED:
                count_end(transition.record)
            await self.notifier.publish(task_id)
        except MCPTasksError:
            logger.debug("failing task %s failed", redact(task_id))

    async def _release(self, claimed: Claimed, *, claimable: bool = False) -> None:
        """Give the lease up; ``claimable``: the task is not over, so wake the recovery
        loops of every process (this one's at shutdown is gone: another takes it at once)."""
        try:
            await self.store.release(claimed.lease)
        except MCPTasksError:
            logger.debug("releasing the lease of task %s failed", redact(claimed.record.task_id))
            return
        if claimable:
            await self.notifier.publish(WORK_SIGNAL)

    @staticmethod
    async def _outcome(context: RunningTaskContext, body: Body) -> StatusChange | None:
        token = context.bind()
        try:
            return await body(context)
        except TaskCancelled:
            return None
        except RetryRequested as retry:
            return Retry(retry.error)
        except Exception:
            logger.exception(
                "a task body of tool %r raised",
                context.tool,
                extra={"tool": context.tool, "attempt": context.attempt},
            )
            return Fail({"code": -32603, "message": "Internal error"})
        finally:
            context.unbind(token)

    async def _reap_forever(self, interval_s: float) -> None:
        outage = Outage(logger, "reaping expired tasks", describe_store(self.store))
        while True:
            await anyio.sleep(interval_s)
            try:
                with Untraced():  # a poll every 30 s: measured, not traced
                    removed = await self.store.reap()
            except MCPTasksError as exc:
                outage.failed(exc)
                continue
            outage.recovered()
            if removed:
                instruments.reaped.add(removed)
                logger.info(
                    "reaped %d expired tasks",
                    removed,
                    extra={"reaped": removed, "store": self._backend},
                )

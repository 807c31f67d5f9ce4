"""The protocol engine: which calls become tasks, and what ``tasks/*`` answer, in spec order."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from mcp.shared.exceptions import MCPError
from opentelemetry.trace import INVALID_SPAN
from pydantic import BaseModel

from mcp_tasks.domain.answers import answer_mismatch
from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import (
    InvalidInputRequests,
    MCPTasksError,
    MissingClientCapability,
    NotJSONSafe,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
)
from mcp_tasks.domain.ids import new_task_id, redact
from mcp_tasks.domain.models import (
    Complete,
    Fail,
    NewTask,
    Outcome,
    StatusChange,
    TaskRecord,
    is_positive_ms_or_none,
    validate_input_requests,
)
from mcp_tasks.domain.retries import retry_delays
from mcp_tasks.engine import errors
from mcp_tasks.engine.listen_slots import ListenSlots
from mcp_tasks.engine.options import ServingOptions
from mcp_tasks.engine.policy import Policy, TaskMode, check_policy, resolve_mode
from mcp_tasks.engine.wire import (
    ACK,
    create_task_result,
    get_task_result,
)
from mcp_tasks.runtime.context import (
    AnswerRefused,
    InlineTaskContext,
    InputRequired,
    RetryRequested,
    check_input_requests,
)
from mcp_tasks.runtime.control import UNSET, Deferred, DeferSlot, Unset, defer_slot
from mcp_tasks.runtime.logs import Outage, log_failure
from mcp_tasks.runtime.runner import RECOVERIES, Body, Recovery, Runner, RunnerNotStarted, tool_work
from mcp_tasks.stores.kit import request_bound, rest_of_request
from mcp_tasks.stores.observed import observed
from mcp_tasks.stores.opening import describe_store
from mcp_tasks.telemetry import (
    METHOD,
    OUTCOME,
    STATUS,
    TOOL,
    SpanScope,
    carrier,
    count_end,
    instruments,
    tool_attributes,
    tracing,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from opentelemetry.trace import Span

    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.engine.request_view import RequestView
    from mcp_tasks.runtime.context import RunningTaskContext
    from mcp_tasks.runtime.notifier import Notifier
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

#: What a task call answers while no lifespan runs the runner: what to add, exactly.
NOT_RUNNING_MESSAGE: Final = (
    "The task runner is not running: pass lifespan=tasks.lifespan to the server "
    "(MCPServer(..., lifespan=tasks.lifespan)), or enter `async with tasks.running():` in "
    "a lifespan of your own"
)

TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: A listen stream's reads of the tasks it watches, as a kind of work in the outage log.
LISTEN_WORK: Final = "subscriptions/listen"
#: The span of each ``tasks/*`` method, and its attributes (built once: this is the hot path).
_SPANS: Final = {
    method: ("mcp_tasks." + method.removeprefix("tasks/"), {METHOD: method})
    for method in TASK_METHODS
}
#: What a JSON-RPC error answer is recorded as on a span (the SDK's own spans' key).
RPC_STATUS_CODE: Final = "rpc.response.status_code"
REMOVED_METHODS: Final = frozenset({"tasks/list", "tasks/result"})

#: Far above the 43 characters of a minted id; a longer ``taskId`` names no task.
MAX_TASK_ID_LENGTH: Final = 256


Preflight: TypeAlias = Callable[
    [Mapping[str, Any], Mapping[str, Any]],
    "Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None",
]
"""``(arguments, input_responses) → input requests still needed`` (empty/None: go on).

Runs before a task is created; while it needs input the call answers a synchronous
``InputRequiredResult`` (multi-round-trip requests), and the task is minted only on the
round that has every answer."""

TtlOption: TypeAlias = "int | Unset | Callable[[Mapping[str, Any]], int | None] | None"
CallNext: TypeAlias = Callable[[], Awaitable[Any]]
ResultConverter: TypeAlias = Callable[[Any], StatusChange]
ToolCall: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""Runs a tool with these arguments and returns what it returns (its result)."""
ArgumentsCheck: TypeAlias = Callable[[Mapping[str, Any]], bool]
"""Whether these arguments pass the tool's own input validation (its SDK's, not ours)."""
ArgumentsCheckFinder: TypeAlias = Callable[[str], "ArgumentsCheck | None"]
"""Finds a tool's :data:`ArgumentsCheck` by its name on a server; ``None``: none there."""


@dataclass(frozen=True)
class ToolOptions:
    """How one tool takes part in tasks."""

    mode: Policy = TaskMode.OPTIONAL
    ttl_ms: TtlOption = UNSET
    """Per tool, or a function of the call's arguments (per call); UNSET = the default."""
    poll_interval_ms: int | None = None
    preflight: Preflight | None = None
    manual: bool = False
    """Run the tool inline; it returns :func:`~mcp_tasks.runtime.control.defer` to make a task."""
    retry_delays_ms: Iterable[int] = ()
    """The delay before each retry a body asks for (``TaskContext.retry``); see
    :mod:`mcp_tasks.domain.retries` for the fixed and exponential helpers."""
    recovery: Recovery = "rerun"
    """A task whose run was interrupted (its process died or stopped mid-body) is run again
    (``"rerun"``), or fails with "The task was interrupted; this tool is not re-run"
    (``"fail"``: for a body that must not run twice; the client decides what next)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_policy(self.mode))
        if self.recovery not in RECOVERIES:
            raise ValueError(f"recovery must be 'rerun' or 'fail', got {self.recovery!r}")
        object.__setattr__(self, "retry_delays_ms", retry_delays(self.retry_delays_ms))
        ttl: object = self.ttl_ms
        if not (isinstance(ttl, Unset) or callable(ttl) or is_positive_ms_or_none(ttl)):
            raise ValueError("ttl_ms must be a positive integer, None or a function")


def could_be_task_id(task_id: str) -> bool:
    """Whether ``task_id`` could name a task: printable text (no control characters, no lone
    surrogates) of bounded length. Anything else is answered like an unknown id."""
    return len(task_id) <= MAX_TASK_ID_LENGTH and task_id.isprintable()


def result_to_change(result: object) -> StatusChange:
    """How a tool body's return value ends its task (the official SDK's result types).

    A tool's own error arrives as a result with ``isError`` (→ ``completed``). An
    ``InputRequiredResult`` cannot be answered inside a task, and a ``CreateTaskResult``
    (``resultType: "task"``) is no tool result: both end the task ``failed`` (-32603).
    """
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not isinstance(result, Mapping):
        return Complete({"content": [{"type": "text", "text": str(result)}], "isError": False})
    if result.get("resultType") == "input_required":
        logger.error("a task body returned an InputRequiredResult; use TaskContext.request_input")
        return Fail({"code": -32603, "message": "The tool asked for input in an unsupported way"})
    if result.get("resultType") == "task":
        logger.error("a task body returned a CreateTaskResult, which is not a tool result")
        return Fail({"code": -32603, "message": "The tool returned a task instead of a result"})
    return Complete({k: v for k, v in result.items() if k != "resultType"})


def _error_of(exc: MCPError | MCPTasksError) -> dict[str, Any]:
    error = exc if isinstance(exc, MCPError) else errors.to_jsonrpc_error(exc)
    dumped: dict[str, Any] = error.error.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


async def run_tool_call(
    call: CallNext, to_change: ResultConverter = result_to_change
) -> StatusChange:
    """Run a tool inside a task and say how the task ends: its result through ``to_change``;
    a JSON-RPC error (``MCPError``) fails the task as that error, and so does a domain error
    from a tool the SDK does not wrap (low-level ``Server``), as the error it maps to."""
    try:
        return to_change(await call())
    except (MCPError, MCPTasksError) as exc:
        return Fail(_error_of(exc))


def tool_executor(call: ToolCall, to_change: ResultConverter = result_to_change) -> Body:
    """The executor of a tool: runs a task of it from the task's record alone (its arguments;
    the task's context is bound), in any process, as often as the task needs."""

    async def execute(context: RunningTaskContext) -> StatusChange:
        return await run_tool_call(lambda: call(context.arguments), to_change)

    return execute


def _fit(check: ArgumentsCheck, arguments: Mapping[str, Any]) -> bool:
    """``check``'s verdict; a check that cannot decide leaves the call to the SDK's run."""
    try:
        return check(arguments)
    except Exception:
        logger.debug("an argument check failed to decide", exc_info=True)
        return True


def _capabilities_of(request: RequestView) -> dict[str, Any]:
    """The client capabilities a task keeps: those of the request that creates it."""
    return dict(request.client_capabilities or {})


class TaskEngine:
    """SEP-2663 semantics over a Store. Adapters translate their SDK's request into a
    :class:`RequestView` and call :meth:`handle_tool_call` / :meth:`handle_tasks_method`."""

    def __init__(
        self,
        store: Store,
        runner: Runner,
        notifier: Notifier,
        options: ServingOptions | None = None,
        *,
        clock: Clock = system_clock,
        facade: object = None,
    ) -> None:
        self.serve_from(store)
        #: What built this engine and serves through it (the ``Tasks``; ``None`` for an
        #: engine built alone): found from the adapters an app holds (``mcp-tasks serve``).
        self.facade = facade
        #: How requests are served (default TTL and poll interval, the ``Mcp-Name`` rule,
        #: listen bounds).
        self.options = options if options is not None else ServingOptions()
        #: Bounds on open task listen streams (per process, per principal).
        self.listen_slots = ListenSlots(
            self.options.max_listen_streams, self.options.max_listen_streams_per_owner
        )
        self.runner = runner
        self._said_not_running = False
        self.notifier = notifier
        self.tools: dict[str, ToolOptions] = {}
        #: Per tool, the SDK's own argument validation, run before a task is created.
        self.argument_checks: dict[str, ArgumentsCheck] = {}
        #: Per server, what finds the check of a tool that has no entry in
        #: :attr:`argument_checks` (a tool registered on its server by name).
        self.argument_check_finders: dict[object, ArgumentsCheckFinder] = {}
        # Record times are on the store's clock (the database server's, on Postgres) and
        # the wire's poll hints compare them with "now", so "now" is the store's clock as
        # estimated here: ours plus the offset learned from each create (zero until this
        # node creates a task; the hint stays bounded either way).
        self._local_clock = clock
        self._store_offset_ms = 0
        self.clock: Clock = self.store_now

    def __repr__(self) -> str:
        return f"TaskEngine(store={self.store!r}, tools={sorted(self.tools)})"

    @property
    def store(self) -> Store:
        """The store, observed (:mod:`mcp_tasks.stores.observed`): each operation a span."""
        return self._store

    def serve_from(self, store: Store) -> None:
        """Serve from ``store`` (observed unless it is already; ``Tasks`` hands the one it
        observed): before the app starts (``Tasks.use_store``)."""
        self._store = observed(store)
        #: The store failing requests, per kind (a SQLite file locked by another process
        #: fails writes while reads go on): each said once, naming the store in use, and
        #: when it is back; each request meanwhile answers -32603.
        self.outages = {
            kind: Outage(logger, kind, describe_store(store))
            for kind in ("creating tasks", *sorted(TASK_METHODS), LISTEN_WORK)
        }

    @property
    def notifications_enabled(self) -> bool:
        """Whether task changes are signalled at all (``Tasks(notifier=None)`` turns them off)."""
        return bool(getattr(self.notifier, "enabled", True))

    def store_now(self) -> int:
        """An estimate of the store's clock: ours, corrected by the offset last observed."""
        return self._local_clock() + self._store_offset_ms

    # --- tools/call ---------------------------------------------------------------

    async def handle_tool_call(
        self,
        request: RequestView,
        *,
        name: str,
        arguments: Mapping[str, Any] | None,
        input_responses: Mapping[str, Any] | None,
        call_next: CallNext,
        options: ToolOptions | None = None,
        to_change: ResultConverter = result_to_change,
        arguments_fit: ArgumentsCheck | None = None,
    ) -> Any:
        """Answer a ``tools/call``: synchronously through ``call_next``, an
        ``InputRequiredResult`` (preflight), or a ``CreateTaskResult`` dict.

        ``call_next`` runs the tool; for a task it runs later under the runner (outside
        this request) with the task's :class:`TaskContext` bound. ``to_change`` turns its
        return value into the task's outcome; an :class:`MCPError` it raises fails the task.
        ``arguments_fit`` (else the tool's entry in :attr:`argument_checks`, else what a
        finder in :attr:`argument_check_finders` finds) is the SDK's own argument
        validation: arguments it refuses never become a task.
        """
        options = options if options is not None else self.tools.get(name)
        if options is None:
            return await call_next()
        args: Mapping[str, Any] = arguments or {}
        mode = await resolve_mode(options.mode, args, request)
        if not request.is_modern:  # a legacy-era request never gets a task
            if mode is TaskMode.REQUIRED:
                raise errors.legacy_era_task_required(name, request.protocol_version)
            return await call_next()
        answers: Mapping[str, Any] = dict(input_responses or {})
        if mode is TaskMode.FORBIDDEN:
            return await self._inline(request, args, answers, call_next)
        as_task = request.declares_tasks
        if mode is TaskMode.REQUIRED and not as_task:
            raise errors.missing_capability()
        if options.preflight is not None:
            needed = await self._preflight(options.preflight, request, args, answers)
            if needed:
                return {"resultType": "input_required", "inputRequests": needed}
        if options.manual:
            return await self._manual(
                request,
                name=name,
                arguments=args,
                answers=answers,
                call_next=call_next,
                options=options,
                as_task=as_task,
            )
        if not as_task:
            return await self._inline(request, args, answers, call_next)
        return await self._create_and_run(
            request,
            name=name,
            arguments=args,
            answers=answers,
            call_next=call_next,
            options=options,
            to_change=to_change,
            fits=arguments_fit if arguments_fit is not None else self._arguments_check(name),
        )

    def _arguments_check(self, name: str) -> ArgumentsCheck | None:
        check = self.argument_checks.get(name)
        for find in self.argument_check_finders.values():
            if check is not None:
                break
            try:
                check = find(name)
            except Exception:  # a finder that cannot decide leaves the call to the SDK's run
                logger.debug("finding the argument check of %r failed", name, exc_info=True)
        return check

    async def _preflight(
        self,
        preflight: Preflight,
        request: RequestView,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
    ) -> dict[str, Any]:
        if answers:
            # What the preflight asks with nothing answered: the requests the answers must fit.
            self._check_preflight_answers(
                await self._preflight_requests(preflight, arguments, {}), answers
            )
        requests = await self._preflight_requests(preflight, arguments, answers)
        if not requests:
            return {}
        try:
            check_input_requests(requests, request.client_capabilities or {})
        except MissingClientCapability as exc:
            raise errors.to_jsonrpc_error(exc) from None
        return dict(requests)

    @staticmethod
    async def _preflight_requests(
        preflight: Preflight, arguments: Mapping[str, Any], answers: Mapping[str, Any]
    ) -> dict[str, JSONObject]:
        """The input requests the preflight still needs with ``answers`` (checked)."""
        needed = preflight(arguments, answers)
        if inspect.isawaitable(needed):
            needed = await needed
        if not needed:
            return {}
        try:
            return validate_input_requests(needed)
        except InvalidInputRequests as exc:
            logger.error("a tool's preflight returned unusable input requests: %s", exc)
            raise errors.internal_error("The tool asked for input in an unsupported way") from None

    @staticmethod
    def _check_preflight_answers(
        requests: Mapping[str, JSONObject], answers: Mapping[str, Any]
    ) -> None:
        """Each answer the call carries fits the preflight request of its key (-32602)."""
        for key, request in requests.items():
            if key in answers:
                why = answer_mismatch(request, answers[key])
                if why is not None:
                    raise errors.invalid_answer(key, why)

    @staticmethod
    async def _inline(
        request: RequestView,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
        call_next: CallNext,
    ) -> Any:
        """Run the tool now. Input it asks for and the request does not carry is answered
        as an ``InputRequiredResult`` (multi-round-trip requests): the client calls again
        with the answers in ``inputResponses`` and the body runs again from the start."""
        context = InlineTaskContext(
            arguments=arguments,
            input_responses=answers,
            client_capabilities=request.client_capabilities,
        )
        token = context.bind()
        try:
            result = await call_next()
        except (InputRequired, AnswerRefused):
            result = None
        except RetryRequested as retry:  # no retry without a task: the body's error it is
            raise MCPError(
                code=int(retry.error.get("code", -32603)),  # type: ignore[arg-type]
                message=str(retry.error.get("message", "Internal error")),
                data=retry.error.get("data"),
            ) from None
        except MCPTasksError as error:  # from a tool the SDK does not wrap (low-level Server)
            raise errors.to_jsonrpc_error(error) from None
        finally:
            context.unbind(token)
        if context.refused is not None:  # as pending: whatever the framework made of it
            raise errors.invalid_answer(context.refused.key, context.refused.why)
        if context.pending:  # even if a tool framework turned the signal into an error result
            return {"resultType": "input_required", "inputRequests": dict(context.pending)}
        return result

    def _ttl_for(self, name: str, options: ToolOptions, arguments: Mapping[str, Any]) -> int | None:
        """The task's TTL: the tool's, per call when it is a function, else the default.

        A function's answer must be a positive integer or ``None``; anything else is the
        server's mistake (-32603, logged with the tool's name and the value), not the
        client's."""
        ttl = options.ttl_ms
        if isinstance(ttl, Unset):
            return self.options.default_ttl_ms
        if not callable(ttl):
            return ttl
        chosen: object = ttl(arguments)
        if not is_positive_ms_or_none(chosen):
            logger.error(
                "tool %r: its ttl_ms function returned %.80r, not a positive integer or None",
                name,
                chosen,
                extra={"tool": name},
            )
            raise errors.internal_error("The tool's ttl_ms gave an invalid TTL")
        return chosen

    async def _create(self, task: NewTask) -> TaskRecord:
        tool = {} if task.work is None else {TOOL: task.work.type}
        try:
            record = await self.store.create(task)
        except TaskLimitReached as exc:
            instruments.refused.add(1, tool)
            raise errors.to_jsonrpc_error(exc) from None
        except StoreUnavailable as exc:
            self.outages["creating tasks"].failed(exc)
            raise errors.to_jsonrpc_error(exc) from None
        self.outages["creating tasks"].recovered()
        instruments.created.add(1, tool)
        # created_at was stamped during the call: the estimate errs by one round trip at most.
        self._store_offset_ms = record.created_at - self._local_clock()
        logger.debug("created task %s", redact(task.task_id))
        return record

    async def _create_and_run(
        self,
        request: RequestView,
        *,
        name: str,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
        call_next: CallNext,
        options: ToolOptions,
        to_change: ResultConverter,
        fits: ArgumentsCheck | None,
    ) -> Any:
        if not self.runner.running:
            # Before the task is built: with no lifespan running, that is the answer,
            # whatever the arguments.
            raise self._not_running(name)
        # The task keeps the current trace context (this span) so every run links back here.
        with SpanScope("mcp_tasks.create", {TOOL: name}) as span:
            task_id = new_task_id()
            try:
                task = NewTask(
                    task_id=task_id,
                    owner=request.owner,
                    ttl_ms=self._ttl_for(name, options, arguments),
                    poll_interval_ms=options.poll_interval_ms
                    or self.options.default_poll_interval_ms,
                    work=tool_work(
                        name,
                        arguments,
                        answers,
                        task_id=task_id,
                        retry_delays_ms=tuple(options.retry_delays_ms),
                        trace_context=carrier(),
                    ),
                    client_capabilities=_capabilities_of(request),
                )
            except NotJSONSafe:
                raise errors.invalid_params("Tool arguments are not JSON-safe") from None
            if fits is not None and not _fit(fits, arguments):
                # The SDK validates before the body runs: its chain answers exactly as it
                # answers the same call without a task, and no task is written.
                logger.debug(
                    "tool %r: the arguments fail validation; answered without a task", name
                )
                span.set_attribute(OUTCOME, "not_a_task")
                return await self._inline(request, arguments, answers, call_next)

            async def first_run(context: RunningTaskContext) -> StatusChange:
                # The first run goes through the request's own chain (middleware, other
                # extensions); runs after a crash or a retry use the tool's executor.
                return await run_tool_call(call_next, to_change)

            try:
                # The request's store work, in one bound (the body runs in a task of its own).
                with request_bound():
                    record = await self.runner.create_and_run(task, first_run, self._create)
            except RunnerNotStarted:
                raise self._not_running(name) from None
            # The create was durable before we answer: a tasks/get on any node resolves it now.
            return create_task_result(record, self.clock())

    def _not_running(self, name: str) -> MCPError:
        """The answer to a task call with no runner; the first one is also logged."""
        if not self._said_not_running:
            self._said_not_running = True
            logger.error(
                "A call of tool %r cannot become a task. %s",
                name,
                NOT_RUNNING_MESSAGE,
                extra={"tool": name},
            )
        return errors.internal_error(NOT_RUNNING_MESSAGE)

    async def _manual(
        self,
        request: RequestView,
        *,
        name: str,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
        call_next: CallNext,
        options: ToolOptions,
        as_task: bool,
    ) -> Any:
        slot = DeferSlot()
        token = defer_slot.set(slot)
        try:
            result = await self._inline(request, arguments, answers, call_next)
        finally:
            defer_slot.reset(token)
        deferred = slot.deferred if slot.deferred is not None else result
        if not isinstance(deferred, Deferred):
            return result
        if not as_task:
            raise errors.missing_capability()
        problems = deferred.problems()
        if problems:
            logger.error(
                "tool %r returned an unusable defer(): %s",
                name,
                "; ".join(problems),
                extra={"tool": name},
            )
            raise errors.internal_error("The tool returned an invalid task descriptor")
        with SpanScope("mcp_tasks.create", {TOOL: name}):
            return await self._create_deferred(request, name, arguments, options, deferred)

    async def _create_deferred(
        self,
        request: RequestView,
        name: str,
        arguments: Mapping[str, Any],
        options: ToolOptions,
        deferred: Deferred,
    ) -> dict[str, Any]:
        """Write a manual task and hand it to the job system's ``start``."""
        ttl = deferred.ttl_ms
        task = NewTask(
            task_id=new_task_id(),
            owner=request.owner,
            ttl_ms=self._ttl_for(name, options, arguments) if isinstance(ttl, Unset) else ttl,
            poll_interval_ms=deferred.poll_interval_ms
            or options.poll_interval_ms
            or self.options.default_poll_interval_ms,
            status_message=deferred.status_message,
            work=None,
            client_capabilities=_capabilities_of(request),
        )
        with request_bound():  # the request's store work (the tool's own code ran before)
            record = await self._create(task)
        try:
            started = deferred.start(record.task_id)
            if inspect.isawaitable(started):
                await started
        except Exception as exc:  # the job system's own failure, whatever its type
            log_failure(logger, "starting manual task work failed", exc, record.task_id)
            record = await self._fail_quietly(record.task_id, "Starting the task failed") or record
        return create_task_result(record, self.clock())

    async def _fail_quietly(self, task_id: str, message: str) -> TaskRecord | None:
        try:
            transition = await self.store.put_status(
                task_id, Fail({"code": -32603, "message": message})
            )
        except Exception as exc:
            log_failure(logger, "recording a task failure failed", exc, task_id)
            return None
        if transition.outcome is Outcome.APPLIED:
            count_end(transition.record)
        await self.notifier.publish(task_id)
        return transition.record

    # --- tasks/* ------------------------------------------------------------------

    async def handle_tasks_method(
        self, request: RequestView, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Answer ``tasks/get|update|cancel``, gates ordered as docs/architecture.md decision 3:
        capability (-32021) → routing header (-32020) → params (-32602) → lookup (-32602).
        ``tasks/list``, ``tasks/result`` and every legacy-era request: -32601."""
        if method not in TASK_METHODS or not request.is_modern:
            raise errors.method_not_found()
        # Every store call of the request (a read and a write, the signal) in one bound.
        with request_bound():
            if not tracing():  # no span to make: the API's no-op costs a poll microseconds
                return await self._tasks_method(request, method, params, INVALID_SPAN)
            name, attributes = _SPANS[method]
            with SpanScope(name, attributes, expected=(MCPError,)) as span:
                try:
                    return await self._tasks_method(request, method, params, span)
                except MCPError as exc:
                    if span.is_recording():
                        span.set_attribute(RPC_STATUS_CODE, str(exc.error.code))
                    raise

    async def _tasks_method(
        self,
        request: RequestView,
        method: str,
        params: Mapping[str, Any] | None,
        span: Span,
    ) -> dict[str, Any]:
        if not request.declares_tasks:
            raise errors.missing_capability()
        raw = params if isinstance(params, Mapping) else {}
        task_id = raw.get("taskId")
        self._check_name_header(request, task_id, required=self.options.require_name_header)
        if not isinstance(task_id, str) or not task_id:
            raise errors.invalid_params("Missing taskId")
        responses: Mapping[str, Any] | None = None
        if method == "tasks/update":
            responses = raw.get("inputResponses")
            if not isinstance(responses, Mapping):
                raise errors.invalid_params("Missing inputResponses")
        if not could_be_task_id(task_id):
            # Never sent to the store: a NUL or a lone surrogate makes some drivers fail,
            # and that must not turn a bogus id into -32603 and an error log.
            raise errors.task_not_found()
        try:
            if method == "tasks/get":
                record = await self.store.get(task_id, request.owner)
                self.outages[method].recovered()
                if span.is_recording():
                    span.set_attributes({STATUS: record.status.value, **tool_attributes(record)})
                return get_task_result(record, self.clock())
            if responses is not None:  # tasks/update
                await self._check_answers(task_id, request.owner, responses)
                transition = await self.store.update(task_id, request.owner, responses)
            else:
                transition = await self.store.cancel(task_id, request.owner)
                if transition.outcome is Outcome.APPLIED:
                    count_end(transition.record)
            if span.is_recording():
                changed = transition.record
                span.set_attributes({STATUS: changed.status.value, **tool_attributes(changed)})
        except TaskNotFound as exc:
            raise errors.to_jsonrpc_error(exc) from None
        except NotJSONSafe:
            raise errors.invalid_params("inputResponses must be JSON") from None
        except StoreUnavailable as exc:
            self.outages[method].failed(exc)
            raise errors.to_jsonrpc_error(exc) from None
        self.outages[method].recovered()
        # The change is stored: its signal is a hint (subscribers also poll), and it does
        # not keep the answer past the request's bound.
        with rest_of_request():
            await self.notifier.publish(task_id)
        return dict(ACK)

    async def _check_answers(
        self, task_id: str, owner: str | None, responses: Mapping[str, Any]
    ) -> None:
        """An answer to an outstanding request must be a result object (``ElicitResult``,
        ``CreateMessageResult``, ``ListRootsResult``) that fits the request: an accepted
        form's content matches its ``requestedSchema`` (:func:`answer_mismatch`); else
        -32602 naming the key and the field, and nothing is recorded. Values under any
        other key are ignored unread, as the spec asks."""
        try:
            record = await self.store.get(task_id, owner)
        except TaskNotFound:
            return  # the update itself says so (or that the store is unavailable)
        for key, value in responses.items():
            request = record.input_requests.get(key)
            if request is None:
                continue
            if not isinstance(value, Mapping):
                raise errors.invalid_params("Each answer in inputResponses must be a result object")
            why = answer_mismatch(request, value)
            if why is not None:
                raise errors.invalid_answer(key, why)

    @staticmethod
    def _check_name_header(request: RequestView, task_id: object, *, required: bool) -> None:
        """Over HTTP an ``Mcp-Name`` header must carry ``params.taskId`` (the SDK checks it
        only for tools/call, prompts/get and resources/read). A missing header is accepted
        unless ``required``: the SDK's own client and fastmcp-tasks' send none on tasks/*,
        and a missing header routes nothing wrongly (docs/architecture.md decision 3).
        Off HTTP there is nothing to check."""
        headers = request.headers
        if headers is None:
            return
        if headers.get("mcp-name") is None:
            if required:
                raise errors.header_mismatch("Mcp-Name header is required on tasks/* requests")
            return
        name = request.header("mcp-name")
        if name is None:
            raise errors.header_mismatch("Mcp-Name header carries a malformed base64 value")
        if isinstance(task_id, str) and name != task_id:
            raise errors.header_mismatch("Mcp-Name header does not match params.taskId")

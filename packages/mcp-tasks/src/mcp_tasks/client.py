"""A small async client for SEP-2663 tasks over the official SDK `Client` (pure wire).

It knows nothing about this package's server side, so it works against any server that
speaks the `io.modelcontextprotocol/tasks` extension on MCP 2026-07-28:

```python
async with tasks_client("http://127.0.0.1:8000/mcp") as client:
    started = await start_tool(client, "count", {"to": 3})
    if isinstance(started, TaskHandle):
        async for state in started.watch():
            print(state.status, state.status_message)
```

`tasks_client` declares the extension on every request (the SDK stamps the client
capabilities into each request's `_meta`). `watch()` follows a task by the server's pushes
(`notifications/tasks` on a `subscriptions/listen` stream) when the server sends them, and
by polling `tasks/get` otherwise. Plain `client.call_tool(...)` also works:
the `TasksClientExtension` claim turns a `CreateTaskResult` into a handle and waits for it,
answering input requests through the client's own elicitation/sampling callbacks.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager, suppress
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client.session import ElicitationFnT

__all__ = [
    "TASKS_EXTENSION",
    "CreateTaskResult",
    "InputAnswerer",
    "TaskAck",
    "TaskFailed",
    "TaskHandle",
    "TaskNotifications",
    "TaskState",
    "TaskWasCancelled",
    "TasksClientExtension",
    "start_tool",
    "tasks_client",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

# Used when a server sends no pollIntervalMs; the floor keeps a buggy hint of 0 from spinning.
DEFAULT_POLL_INTERVAL_MS = 1_000
MIN_POLL_INTERVAL_MS = 10

# Indirection so a test can observe the waits between polls without slowing the server.
_sleep = anyio.sleep


class _CancelledListenNoise(logging.Filter):
    """Drops the SDK's "Error parsing SSE message" record whose exception is a closed
    stream: the SDK's Streamable HTTP transport logs that, with a traceback, when an SSE
    answer arrives after its caller has gone (a watch's listen stream ending as its
    session closes). It is no parse failure and nothing is lost; a real one still logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (
            record.msg == "Error parsing SSE message"
            and isinstance(error, anyio.BrokenResourceError | anyio.ClosedResourceError)
        )


_SDK_TRANSPORT_LOG = logging.getLogger("mcp.client.streamable_http")
if not any(isinstance(f, _CancelledListenNoise) for f in _SDK_TRANSPORT_LOG.filters):
    _SDK_TRANSPORT_LOG.addFilter(_CancelledListenNoise())

#: A server that serves `taskIds` on `subscriptions/listen` sends the task's state right
#: after its acknowledgment; nothing for this long means it does not: poll instead.
FIRST_PUSH_S = 2.0
#: After a listen stream's end, how long its last notifications may still be on their way
#: (the SDK hands them over on a queue of their own, after the request's result).
END_GRACE_S = 0.5
#: The listen request's read timeout: the answer comes only when the stream ends.
LISTEN_READ_TIMEOUT_S = 24 * 3600.0

WireStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class _TaskFields(types.Result):
    """The fields of the wire `Task` shared by every task result."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: WireStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class CreateTaskResult(_TaskFields):
    """`tools/call` answered with a task handle (`resultType: "task"`), flat on the wire."""

    result_type: Literal["task"] = "task"


class TaskState(_TaskFields):
    """A `tasks/get` result: the `DetailedTask` for the task's current status."""

    result_type: str | None = None
    input_requests: dict[str, dict[str, Any]] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def call_tool_result(self) -> types.CallToolResult:
        """The tool's result for a terminal task.

        Raises:
            TaskFailed: The task ended `failed` (carries the JSON-RPC error).
            TaskWasCancelled: The task ended `cancelled`.
            ValueError: The task is not terminal yet.
        """
        if self.status == "completed":
            return types.CallToolResult.model_validate(self.result or {"content": []})
        if self.status == "failed":
            raise TaskFailed.from_state(self)
        if self.status == "cancelled":
            raise TaskWasCancelled(self)
        raise ValueError(f"task is {self.status}, not terminal")


class TaskAck(types.Result):
    """The empty acknowledgement of `tasks/update` and `tasks/cancel`."""

    model_config = ConfigDict(extra="allow")

    result_type: str | None = None


class TaskFailed(MCPError):
    """The task ended `failed` with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, state: TaskState) -> None:
        super().__init__(code, message, data)
        self.state = state

    @classmethod
    def from_state(cls, state: TaskState) -> TaskFailed:
        error = state.error or {}
        code = error.get("code")
        message = error.get("message")
        return cls(
            code if isinstance(code, int) else types.INTERNAL_ERROR,
            message if isinstance(message, str) else (state.status_message or "task failed"),
            error.get("data"),
            state=state,
        )


class TaskWasCancelled(Exception):
    """The task ended `cancelled`."""

    def __init__(self, state: TaskState) -> None:
        super().__init__("task was cancelled")
        self.state = state


# --- the three tasks/* requests; `name_param` makes the SDK send `Mcp-Name: <taskId>` ---


class _TaskIdParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskIdParams):
    input_responses: dict[str, Any]


class _GetTaskRequest(types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class _UpdateTaskRequest(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class _CancelTaskRequest(types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


InputAnswerer = Callable[
    [str, dict[str, Any]], Awaitable[Mapping[str, Any] | None] | Mapping[str, Any] | None
]
"""Answers one input request: `(key, {"method", "params"})` → the response object, or `None`
to leave the key unanswered for now. A plain function or a coroutine function."""

StatusCallback = Callable[[TaskState], Awaitable[None] | None]
"""Told each change of the task's state; a plain function or a coroutine function."""


async def _outcome(value: Awaitable[Any] | Any) -> Any:
    """What a callback gave: awaited when it is awaitable (a coroutine function's call)."""
    return await value if inspect.isawaitable(value) else value


_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


def session_answerer(session: ClientSession) -> InputAnswerer:
    """Answer input requests through the session's elicitation/sampling/roots callbacks."""

    async def answer(key: str, request: dict[str, Any]) -> Mapping[str, Any] | None:
        parsed = _INPUT_REQUEST.validate_python(request)
        ctx = ClientRequestContext(session=session, request_id=key)
        response = await session.dispatch_input_request(ctx, parsed)
        if isinstance(response, types.ErrorData):
            raise MCPError(response.code, response.message, response.data)
        dumped: dict[str, Any] = response.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped

    return answer


_StreamEnd = Literal["ended", "refused", "broken"]
"""How a listen stream ended: its graceful result, an error answer (the server serves no
`taskIds` there), or a lost connection (or any other failure)."""

_Pushed = TaskState | _StreamEnd


class TaskNotifications:
    """`notifications/tasks`, handed to the watches of their task (by task id).

    One per `TasksClientExtension`, whose notification binding feeds it; a `TaskHandle`
    made through that extension's client listens through it.
    """

    def __init__(self) -> None:
        self._inboxes: dict[str, set[MemoryObjectSendStream[_Pushed]]] = {}

    def binding(self) -> NotificationBinding[TaskState]:
        return NotificationBinding(
            method="notifications/tasks", params_type=TaskState, handler=self._deliver
        )

    async def _deliver(self, state: TaskState) -> None:
        for inbox in list(self._inboxes.get(state.task_id, ())):
            # Unbounded: the watch drains it. Closed: that watch has just ended.
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                inbox.send_nowait(state)

    @contextmanager
    def inbox(
        self, task_id: str
    ) -> Iterator[tuple[MemoryObjectSendStream[_Pushed], MemoryObjectReceiveStream[_Pushed]]]:
        """A queue of `task_id`'s notifications while open; its send side takes the end."""
        send, receive = anyio.create_memory_object_stream[_Pushed](math.inf)
        inboxes = self._inboxes.setdefault(task_id, set())
        inboxes.add(send)
        try:
            with send, receive:
                yield send, receive
        finally:
            inboxes.discard(send)
            if not inboxes:
                del self._inboxes[task_id]


def _session_task_group(session: ClientSession) -> TaskGroup | None:
    """The entered session's own task group, where the SDK's `listen()` runs its streams
    too (`None`: not entered, or an SDK without it: the watch polls)."""
    group = getattr(session, "_task_group", None)
    return group if isinstance(group, TaskGroup) else None


def _updated_at(state: TaskState) -> datetime | None:
    try:
        return datetime.fromisoformat(state.last_updated_at)
    except ValueError:
        return None


class _Changes:
    """Which states a watch yields: the first, then each change of status, status message
    or outstanding input keys; a pushed state older than one seen (notifications may be
    handed over out of order) is no change."""

    def __init__(self) -> None:
        self._last: tuple[object, ...] | None = None
        self._latest: datetime | None = None

    def new(self, state: TaskState) -> bool:
        at = _updated_at(state)
        if at is not None and self._latest is not None:
            try:
                if at < self._latest:
                    return False
            except TypeError:  # one naive, one aware: no order to go by
                pass
        if at is not None:
            self._latest = at
        signature = (state.status, state.status_message, sorted(state.input_requests or {}))
        if signature == self._last:
            return False
        self._last = signature
        return True


class TaskHandle:
    """A task on the server, driven by id: `get`, `update`, `cancel`, `watch`, `wait`."""

    def __init__(
        self,
        session: ClientSession,
        task_id: str,
        created: CreateTaskResult | None = None,
        *,
        notifications: TaskNotifications | None = None,
    ):
        self.session = session
        self.task_id = task_id
        self.created = created
        # Where this session's notifications/tasks arrive; None: watch() only polls.
        self.notifications = notifications

    @classmethod
    def attach(cls, client: Client | ClientSession, task_id: str) -> TaskHandle:
        """A handle for a task id obtained earlier (e.g. persisted across a restart).

        Through a `Client` that carries a `TasksClientExtension`, `watch()` can follow the
        task by push; through a bare `ClientSession` it polls.
        """
        if isinstance(client, ClientSession):
            return cls(client, task_id)
        extension = next(
            (e for e in client.extensions or () if isinstance(e, TasksClientExtension)), None
        )
        notifications = extension.task_notifications if extension is not None else None
        return cls(client.session, task_id, notifications=notifications)

    def __repr__(self) -> str:
        # The id is a bearer capability: show only enough to tell handles apart.
        return f"TaskHandle({self.task_id[:6]}…)"

    async def get(self) -> TaskState:
        """`tasks/get`: the task's current state."""
        request = _GetTaskRequest(params=_TaskIdParams(task_id=self.task_id))
        return await self.session.send_request(request, TaskState)

    async def update(self, input_responses: Mapping[str, Any]) -> None:
        """`tasks/update`: answer some or all outstanding input requests."""
        params = _UpdateParams(task_id=self.task_id, input_responses=dict(input_responses))
        await self.session.send_request(_UpdateTaskRequest(params=params), TaskAck)

    async def cancel(self) -> None:
        """`tasks/cancel`: ask the server to cancel; cancellation is cooperative."""
        request = _CancelTaskRequest(params=_TaskIdParams(task_id=self.task_id))
        await self.session.send_request(request, TaskAck)

    async def watch(self) -> AsyncGenerator[TaskState]:
        """Yield each change of the task, ending at its terminal state.

        A change is a different status, status message or set of outstanding input keys;
        the first state is always yielded. Pushed when the server sends
        `notifications/tasks` on a `subscriptions/listen` stream naming the task (the
        handle came through a `TasksClientExtension` client); polled with `tasks/get`,
        honouring `pollIntervalMs`, when it does not, and after a stream that broke until
        a new one is open. Leaving it early (`break`) is fine; `contextlib.aclosing`
        closes its stream at once rather than when the generator is collected.
        """
        changes = _Changes()
        push = self.notifications is not None
        interval = self.created.poll_interval_ms if self.created else None
        while True:
            spawn = _session_task_group(self.session)
            if push and self.notifications is not None and spawn is not None:
                heard = False
                end: _StreamEnd | Literal["silent"] = "silent"
                # The stream's request runs in the session's task group, not in one of
                # ours: a generator left early (a `break`) then holds no task group, and
                # closing it, in any task, only cancels this scope.
                stream = anyio.CancelScope()
                with self.notifications.inbox(self.task_id) as (send, receive):
                    try:
                        spawn.start_soon(self._listen, send.clone(), stream)
                        while True:
                            item: _Pushed | None = None
                            limit = FIRST_PUSH_S if not heard else math.inf
                            with anyio.move_on_after(END_GRACE_S if end != "silent" else limit):
                                item = await receive.receive()
                            if item is None:  # nothing came in time (or after the end)
                                break
                            if isinstance(item, str):  # the stream is over: drain what is due
                                end = item
                                continue
                            heard = True
                            if changes.new(item):
                                yield item
                            if item.is_terminal:
                                return
                    finally:
                        stream.cancel()
                # Only a stream that worked and broke is worth opening again.
                push = heard and end == "broken"
            state = await self.get()
            if changes.new(state):
                yield state
            if state.is_terminal:
                return
            if state.poll_interval_ms is not None:
                interval = state.poll_interval_ms
            delay = max(interval or DEFAULT_POLL_INTERVAL_MS, MIN_POLL_INTERVAL_MS)
            await _sleep(delay / 1000)

    async def _listen(self, end: MemoryObjectSendStream[_Pushed], scope: anyio.CancelScope) -> None:
        """Hold a `subscriptions/listen` stream naming this task, until `scope` is
        cancelled; then say how it ended. Never raises: a failure is the watch's cue to
        poll."""
        request = types.SubscriptionsListenRequest(
            params=types.SubscriptionsListenRequestParams(
                notifications=types.SubscriptionFilter.model_validate({"taskIds": [self.task_id]})
            )
        )
        outcome: _StreamEnd = "ended"
        with end, scope:
            try:
                await self.session.send_request(
                    cast("Any", request),
                    types.SubscriptionsListenResult,
                    request_read_timeout_seconds=LISTEN_READ_TIMEOUT_S,
                )
            except MCPError as error:
                outcome = "broken" if error.code == types.CONNECTION_CLOSED else "refused"
            except Exception:  # a transport failure: the stream broke
                outcome = "broken"
            # Gone: the watch ended meanwhile. (Nothing may raise here: this runs in the
            # session's own task group.)
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                end.send_nowait(outcome)

    async def wait(
        self,
        *,
        answer: InputAnswerer | None = None,
        on_status: StatusCallback | None = None,
    ) -> TaskState:
        """Watch the task to its terminal state, answering input requests with `answer`.

        Each key is answered once: `inputRequests` is a snapshot that repeats keys until the
        server has processed their answers. Without `answer`, the session's callbacks
        answer; a callback that returns an error (e.g. the SDK's default when no elicitation
        callback is set) raises `MCPError` and leaves the task waiting. `answer` and
        `on_status` may each be a plain function or a coroutine function.
        """
        answerer = answer or session_answerer(self.session)
        answered: set[str] = set()
        async with aclosing(self.watch()) as states:
            async for state in states:
                if on_status is not None:
                    await _outcome(on_status(state))
                if state.status == "input_required":
                    responses: dict[str, Any] = {}
                    for key, request in (state.input_requests or {}).items():
                        if key in answered:
                            continue
                        response = await _outcome(answerer(key, request))
                        if response is not None:
                            responses[key] = dict(response)
                    if responses:
                        await self.update(responses)
                        answered.update(responses)
                if state.is_terminal:
                    return state
        raise AssertionError("watch() ends only at a terminal state")  # pragma: no cover


_DETACH: ContextVar[bool] = ContextVar("mcp_tasks_client_detach", default=False)


class _Detached(Exception):  # control flow only, never seen by callers
    """Carries a fresh handle out of the claim resolver to `start_tool`."""

    def __init__(self, handle: TaskHandle) -> None:
        super().__init__("task handle detached")
        self.handle = handle


class TasksClientExtension(ClientExtension):
    """Declares the tasks extension and resolves `CreateTaskResult` for `Client.call_tool`.

    With this extension, `client.call_tool(...)` waits for a task to finish and returns
    its `CallToolResult` (raising `TaskFailed` / `TaskWasCancelled`), so task-returning tools
    read like ordinary ones. Use `start_tool` to get the handle instead.
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        *,
        answer: InputAnswerer | None = None,
        on_status: StatusCallback | None = None,
    ) -> None:
        self._answer = answer
        self._on_status = on_status
        self.task_notifications = TaskNotifications()

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [self.task_notifications.binding()]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        handle = TaskHandle(
            ctx.session, created.task_id, created, notifications=self.task_notifications
        )
        if _DETACH.get():
            raise _Detached(handle)
        state = await handle.wait(answer=self._answer, on_status=self._on_status)
        return state.call_tool_result()


def tasks_client(
    server: str | Any,
    *,
    extension: TasksClientExtension | None = None,
    elicitation_callback: ElicitationFnT | None = None,
    **client_options: Any,
) -> Client:
    """A `Client` on the 2026-07-28 wire that declares the tasks extension on every request."""
    return Client(
        server,
        extensions=[extension or TasksClientExtension()],
        elicitation_callback=elicitation_callback,
        **client_options,
    )


async def start_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    meta: types.RequestParamsMeta | None = None,
) -> TaskHandle | types.CallToolResult:
    """Call a tool; return a `TaskHandle` if the server made it a task, else its result.

    The client must carry a `TasksClientExtension` (see `tasks_client`), or the server will not
    answer with a task.
    """
    # Going through `Client.call_tool` keeps the SDK's input-required rounds (MRTR before the
    # task) and header-mismatch retry; the claim resolver hands the handle back via _Detached.
    token = _DETACH.set(True)
    try:
        return await client.call_tool(name, arguments, meta=meta)
    except _Detached as detached:
        return detached.handle
    finally:
        _DETACH.reset(token)

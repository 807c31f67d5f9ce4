"""TaskContext: what a task body uses to report progress, ask for input and see cancellation."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Final, NoReturn

import anyio

from mcp_tasks.domain.answers import answer_mismatch
from mcp_tasks.domain.errors import (
    InputKeyReused,
    InputNotPossible,
    MissingClientCapability,
    StaleLease,
    StoreUnavailable,
)
from mcp_tasks.domain.ids import redact
from mcp_tasks.domain.models import (
    Lease,
    Progress,
    RequireInput,
    input_digest,
    validate_input_requests,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.notifier import POLL_FALLBACK_S
from mcp_tasks.telemetry import TOOL, instruments

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.runtime.notifier import Notifier, Subscription
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

#: How soon a running task's store call is sent again when the store did not answer.
STORE_RETRY_S: Final = 1.0


def _declared(capabilities: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """A declared capability's settings object (``None``: not declared, or not an object)."""
    value = capabilities.get(name)
    return value if isinstance(value, Mapping) else None


def undeclared_capability(
    request: Mapping[str, Any], capabilities: Mapping[str, Any]
) -> dict[str, object] | None:
    """The one place that decides whether an input request may be sent to a client: ``None``
    when ``capabilities`` (the client's, as declared on the request that created the task or
    on the synchronous call itself) cover it, else the capability it lacks, shaped as
    ``requiredCapabilities`` (-32021).

    * ``elicitation/create`` in URL mode (``params.mode == "url"``) needs
      ``elicitation.url``; in form mode (``mode`` absent or ``"form"``) it needs
      ``elicitation.form``, or an ``elicitation`` object that names neither mode (an empty
      ``elicitation: {}`` means form, 2026-07-28 schema). Any other mode cannot be declared.
    * ``sampling/createMessage`` needs ``sampling``; with ``params.tools`` or
      ``params.toolChoice`` it needs ``sampling.tools``; with ``includeContext`` other than
      ``"none"`` it needs ``sampling.context``.
    * ``roots/list`` needs ``roots``.
    * Any other method cannot be declared.
    """
    method = request.get("method")
    raw_params = request.get("params")
    params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
    if method == "elicitation/create":
        elicitation = _declared(capabilities, "elicitation")
        mode = params.get("mode", "form")
        if mode == "url":
            declared = elicitation is not None and _declared(elicitation, "url") is not None
            return None if declared else {"elicitation": {"url": {}}}
        if mode != "form":
            return {"elicitation": {str(mode)[:40]: {}}}
        if elicitation is None:
            return {"elicitation": {}}
        if _declared(elicitation, "form") is not None or not (
            "form" in elicitation or "url" in elicitation
        ):
            return None
        return {"elicitation": {"form": {}}}
    if method == "sampling/createMessage":
        sampling = _declared(capabilities, "sampling")
        if sampling is None:
            return {"sampling": {}}
        if (params.get("tools") is not None or params.get("toolChoice") is not None) and _declared(
            sampling, "tools"
        ) is None:
            return {"sampling": {"tools": {}}}
        context = params.get("includeContext", "none")
        if context != "none" and _declared(sampling, "context") is None:
            return {"sampling": {"context": {}}}
        return None
    if method == "roots/list":
        return None if _declared(capabilities, "roots") is not None else {"roots": {}}
    return {str(method)[:80]: {}}


def check_input_requests(
    requests: Mapping[str, Mapping[str, Any]], capabilities: Mapping[str, Any]
) -> None:
    """Refuse input requests the client did not declare (:func:`undeclared_capability`).

    Raises:
        MissingClientCapability: naming the first capability missing.
    """
    for request in requests.values():
        missing = undeclared_capability(request, capabilities)
        if missing is not None:
            raise MissingClientCapability(missing)


_current: ContextVar[TaskContext | None] = ContextVar("mcp_tasks_current_context", default=None)


def current_task_context() -> TaskContext | None:
    """The TaskContext of the task body (or synchronous call) running in this context."""
    return _current.get()


class TaskCancelled(BaseException):
    """The task was cancelled or lost its lease; the body should stop.

    A ``BaseException`` like anyio's own cancellation, so that tool frameworks which turn
    every ``Exception`` into an error result let it through to the runner."""


class RetryRequested(BaseException):
    """The body asks to run again later (:meth:`TaskContext.retry`): the task waits its
    tool's next retry delay and runs again, or, with no delay left, fails with :attr:`error`.

    A ``BaseException``, so that tool frameworks which turn every ``Exception`` into an
    error result let it through to the runner. An exception never uses up a retry by
    itself: only this signal does."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "retry requested")))
        self.error: JSONObject = dict(error)


def retry_error(message: str, code: int = -32603, data: JSONValue = None) -> JSONObject:
    """The JSON-RPC error a retry request carries (the task's error once no retry is left)."""
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


class InputRequired(BaseException):
    """A synchronous call asked for input its request did not carry: the engine answers an
    ``InputRequiredResult`` with :attr:`requests`, and the client calls again with the
    answers in ``inputResponses`` (multi-round-trip requests, 2026-07-28).

    A ``BaseException``, so that tool frameworks which turn every ``Exception`` into an
    error result let it through to the engine."""

    def __init__(self, requests: Mapping[str, Any]) -> None:
        super().__init__("the call needs input from the client")
        self.requests = dict(requests)


class AnswerRefused(BaseException):
    """A synchronous call carries an answer that does not fit the request the body asked
    (:func:`~mcp_tasks.domain.answers.answer_mismatch`): the engine answers -32602 naming
    it, and the body never sees the answer. A ``BaseException``, as :class:`InputRequired`."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"Invalid answer to input request {key!r}: {why}")
        self.key = key
        self.why = why


class TaskContext:
    """The handle a tool body gets. This base is what a call outside the engine's control
    gets (a tool without task options, a request of an older era): progress is a no-op and
    asking for input raises :class:`InputNotPossible` (-32603). A synchronous call the
    engine runs gets an :class:`InlineTaskContext`, a task a :class:`RunningTaskContext`.
    """

    def __init__(
        self,
        *,
        arguments: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
    ) -> None:
        self._arguments: Mapping[str, Any] = dict(arguments or {})
        self._input_responses: Mapping[str, Any] = dict(input_responses or {})
        self._cancelled = False

    def bind(self) -> Token[TaskContext | None]:
        """Make this the current context (returns a token for :meth:`unbind`)."""
        return _current.set(self)

    @staticmethod
    def unbind(token: Token[TaskContext | None]) -> None:
        """Restore the context that was current before :meth:`bind`."""
        _current.reset(token)

    @property
    def task_id(self) -> str | None:
        """The task's id, or ``None`` when the call runs synchronously."""
        return None

    @property
    def idempotency_key(self) -> str | None:
        """The same on every run of this task (the task id): a body may run more than once
        (after a crash, a lost lease or a retry), so pass this to anything that must happen
        once (a payment, an email, an upstream job). ``None`` when the call is synchronous."""
        return None

    @property
    def owner(self) -> str | None:
        """The principal that created the task (the same on every run, on any process);
        ``None`` for an unauthenticated caller or a synchronous call."""
        return None

    @property
    def attempt(self) -> int:
        """How many retries came before this run (0 on the first run; a re-run after a crash
        is not a retry and keeps the count)."""
        return 0

    def retry(self, message: str, *, code: int = -32603, data: JSONValue = None) -> NoReturn:
        """Stop this run and run again after the tool's next retry delay; with no delay left
        (or none configured, or a synchronous call) the task fails with this error.

        Raises:
            RetryRequested: always (let it propagate).
        """
        raise RetryRequested(retry_error(message, code, data))

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The tool call's arguments."""
        return self._arguments

    @property
    def input_responses(self) -> Mapping[str, Any]:
        """Answers to the input rounds resolved before the task was created (MRTR)."""
        return self._input_responses

    @property
    def cancelled(self) -> bool:
        """Whether the task was cancelled (the body is then cancelled too, within a second)."""
        return self._cancelled

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress; on a task it becomes the ``statusMessage``."""
        return None

    async def request_input(
        self, requests: Mapping[str, Mapping[str, Any]], status_message: str | None = None
    ) -> dict[str, JSONValue]:
        """Ask the client and return every answer: key → the client's result (e.g. an
        ``ElicitResult``). In a task the task waits in ``input_required``; in a synchronous
        call the call answers an ``InputRequiredResult`` and the body runs again on the
        call that brings the answers. A key asked again with the same request returns its
        answer (a replay); with a different request it raises :class:`InputKeyReused`.
        A kind of input the client did not declare raises :class:`MissingClientCapability`."""
        raise InputNotPossible

    async def elicit(
        self, key: str, message: str, schema: Mapping[str, Any] | None = None
    ) -> JSONObject:
        """Ask one form question; returns the ``ElicitResult`` (``{action, content?}``)."""
        request: JSONObject = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": dict(schema or {"type": "object", "properties": {}}),
            },
        }
        answers = await self.request_input({key: request})
        answer = answers[key]
        return answer if isinstance(answer, dict) else {"action": "accept", "content": answer}


class InlineTaskContext(TaskContext):
    """The context of a synchronous call the engine runs (2026-07-28): input is asked by
    multi-round-trip requests. Answers the request carries in ``inputResponses`` are
    returned; otherwise :meth:`request_input` raises :class:`InputRequired` and the engine
    answers an ``InputRequiredResult`` with the missing requests."""

    def __init__(
        self,
        *,
        arguments: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(arguments=arguments, input_responses=input_responses)
        self._client_capabilities: Mapping[str, Any] = dict(client_capabilities or {})
        #: Every key this run asked → its request's digest (the body runs again from the
        #: start on each round, so a key asked twice in one run with two requests is seen).
        self._asked: dict[str, str] = {}
        #: What the call still needs from the client, once the body asked for it.
        self.pending: dict[str, JSONObject] = {}
        #: An answer the call carries that does not fit its request, once the body asked.
        self.refused: AnswerRefused | None = None

    def __repr__(self) -> str:
        return "InlineTaskContext()"

    async def request_input(
        self, requests: Mapping[str, Mapping[str, Any]], status_message: str | None = None
    ) -> dict[str, JSONValue]:
        checked = validate_input_requests(requests)
        for key, request in checked.items():
            digest = input_digest(request)
            if self._asked.setdefault(key, digest) != digest:
                raise InputKeyReused(key)
        check_input_requests(checked, self._client_capabilities)
        missing = {k: v for k, v in checked.items() if k not in self._input_responses}
        if missing:
            self.pending.update(missing)
            raise InputRequired(self.pending)
        for key, request in checked.items():
            why = answer_mismatch(request, self._input_responses[key])
            if why is not None:
                self.refused = AnswerRefused(key, why)
                raise self.refused
        return {k: self._input_responses[k] for k in checked}


def progress_message(progress: float, total: float | None, message: str | None) -> str:
    """The statusMessage a progress report becomes: the message, with ``(progress/total)``
    appended when there is a total (``"Fetching (1/3)"``), so a client can show the numbers
    (the wire has no progress field for a task); without a message, the numbers alone."""
    numbers = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
    if message:
        return f"{message} ({numbers})" if total is not None else message
    return numbers


class RunningTaskContext(TaskContext):
    """The context of a body running as a task under the runner.

    A store that is away while the lease holds changes nothing for the body: a progress
    report waits (the latest only) and is written when the store is back (the runner's
    watch sends it, :meth:`send_unsent`), and an input request and the read of its answers
    are sent again until the store answers. Once the lease has run out for certain
    (:attr:`lease_lapses_at`) the runner's watch stops the body, as when another worker
    takes the task over.
    """

    def __init__(
        self,
        *,
        task_id: str,
        store: Store,
        notifier: Notifier,
        lease: Lease,
        arguments: Mapping[str, Any] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        owner: str | None = None,
        attempt: int = 0,
        tool: str | None = None,
        lease_lapses_at: float = math.inf,
    ) -> None:
        super().__init__(arguments=arguments, input_responses=input_responses)
        self._owner = owner
        self._attempt = attempt
        self._tool = tool
        # What this task's input rounds are counted and timed under.
        self._measured = {} if tool is None else {TOOL: tool}
        # The task's client capabilities, from its record (those of the request that
        # created it): a task never asks for an input kind its client did not declare, on
        # any node and after a re-run. None: not known (a task created without them).
        self._client_capabilities = client_capabilities
        self._task_id = task_id
        self._store = store
        self._notifier = notifier
        self.lease = lease
        #: When (anyio's clock) the lease has run out for certain unless renewed: until
        #: then a store that does not answer is waited for.
        self.lease_lapses_at = lease_lapses_at
        #: The latest progress report the store has not taken (it was away), if any.
        self.unsent_progress: Progress | None = None
        # One leased write at a time: a report sent late never lands after a newer write.
        self._writing = anyio.Lock()
        #: The runner's watch of this run (its subscription to the task): not woken by this
        #: run's own writes, which cannot have ended the task or taken it over.
        self.watch: Subscription | None = None

    def __repr__(self) -> str:
        return "RunningTaskContext()"

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def idempotency_key(self) -> str:
        return self._task_id

    @property
    def owner(self) -> str | None:
        return self._owner

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def tool(self) -> str | None:
        """The name of the task's tool (``None`` for a task without one)."""
        return self._tool

    def mark_cancelled(self) -> None:
        self._cancelled = True

    def renewed(self, lease: Lease, lease_ms: int) -> None:
        """The lease was just claimed or renewed for ``lease_ms``."""
        self.lease = lease
        self.lease_lapses_at = anyio.current_time() + lease_ms / 1000

    async def _put(self, change: Progress | RequireInput) -> None:
        """A leased write; a refused lease (another worker took the task over, or it ended)
        stops this run at once. Once written, an unsent progress report is outdated.

        Raises:
            StoreUnavailable: the store did not answer.
        """
        async with self._writing:
            try:
                await self._store.put_status(self._task_id, change, lease=self.lease)
            except StaleLease:
                self.mark_cancelled()
                raise TaskCancelled from None
            self.unsent_progress = None
        await self._publish()

    async def _publish(self) -> None:
        """Signal this run's own write (the watch is not woken by it)."""
        watch = self.watch
        if watch is None:
            await self._notifier.publish(self._task_id)
            return
        watch.own_change()
        try:
            await self._notifier.publish(self._task_id)
        finally:
            watch.own_change(expected=False)

    async def send_unsent(self) -> None:
        """Write the progress report the store was away for (the runner's watch calls this
        once the store answers again).

        Raises:
            StoreUnavailable: still away; the report keeps waiting.
            StaleLease: the lease is lost (the watch stops the body).
        """
        async with self._writing:
            change = self.unsent_progress
            if change is None:
                return
            await self._store.put_status(self._task_id, change, lease=self.lease)
            if self.unsent_progress is change:
                self.unsent_progress = None
        await self._publish()

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress. Advisory: while the store is away the latest report waits and
        is written when it is back, and the body goes on."""
        change = Progress(progress_message(progress, total, message))
        if self.unsent_progress is not None:  # the store is away: only the latest waits
            self.unsent_progress = change
            return
        try:
            await self._put(change)
        except StoreUnavailable:
            self.unsent_progress = change

    def _missing(
        self, record: TaskRecord, checked: Mapping[str, JSONObject]
    ) -> dict[str, JSONObject]:
        """The requests not asked before: a key asked before with the same request is a
        replay (e.g. after a re-run), answered or awaited, never asked again. The same key
        with a different request is the body's mistake: the new question is never sent.

        Raises:
            InputKeyReused: a key asked before with another request.
        """
        missing: dict[str, JSONObject] = {}
        for key, request in checked.items():
            asked = record.asked_inputs.get(key)
            if asked is None:
                if key not in record.input_responses:
                    missing[key] = request
            elif asked != input_digest(request):
                raise InputKeyReused(key)
        return missing

    async def request_input(
        self, requests: Mapping[str, Mapping[str, Any]], status_message: str | None = None
    ) -> dict[str, JSONValue]:
        checked = validate_input_requests(requests)
        if self._client_capabilities is not None:
            check_input_requests(checked, self._client_capabilities)
        keys = tuple(checked)
        async with self._notifier.subscribe(self._task_id) as changes:
            asked_at: float | None = None
            unread = False  # the last read failed
            while True:  # read, ask what is missing; again from the read if the store is away
                try:
                    record = await self._store.get(self._task_id, ANY_OWNER)
                    missing = self._missing(record, checked)
                    if missing:
                        # A request whose reply was lost may have been written: the read
                        # before the next try then finds it asked.
                        await self._put(RequireInput(missing, status_message))
                        asked_at = time.perf_counter()
                        instruments.input_rounds.add(1, self._measured)
                        logger.debug("task %s waits for input", redact(self._task_id))
                    break
                except StoreUnavailable:  # until it answers, or the watch stops the body
                    await anyio.sleep(STORE_RETRY_S)
            while True:
                if all(k in record.input_responses for k in keys):
                    if asked_at is not None:
                        waited = time.perf_counter() - asked_at
                        instruments.input_wait.record(waited, self._measured)
                    return {k: record.input_responses[k] for k in keys}
                if record.status.is_terminal:
                    raise TaskCancelled
                await changes.wait(POLL_FALLBACK_S if unread else changes.fallback_s)
                try:
                    record = await self._store.get(self._task_id, ANY_OWNER)
                except StoreUnavailable:  # paced by the wait above: polled until it answers
                    unread = True
                    continue
                unread = False

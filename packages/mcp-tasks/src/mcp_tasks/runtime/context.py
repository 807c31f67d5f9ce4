"""TaskContext: what a task body uses to report progress, ask for input and see cancellation."""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Final

from mcp_tasks.domain.errors import MissingClientCapability
from mcp_tasks.domain.ids import redact
from mcp_tasks.domain.jsonsafe import ensure_object
from mcp_tasks.domain.models import Lease, Progress, RequireInput
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue
    from mcp_tasks.runtime.notifier import Notifier
    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

#: How long a waiting body sleeps between re-reads when no change signal arrives
#: (a signal from another node may never come: the slow path must still make progress).
INPUT_RECHECK_S: Final = 2.0

#: The client capability each kind of input request needs (MRTR: a server never asks for an
#: input kind the request did not declare).
INPUT_CAPABILITY: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}

_current: ContextVar[TaskContext | None] = ContextVar("mcp_tasks_current_context", default=None)


def current_task_context() -> TaskContext | None:
    """The TaskContext of the task body (or synchronous call) running in this context."""
    return _current.get()


class TaskCancelled(BaseException):
    """The task was cancelled or lost its lease; the body should stop.

    A ``BaseException`` like anyio's own cancellation, so that tool frameworks which turn
    every ``Exception`` into an error result let it through to the runner."""


class TaskContext:
    """The handle a tool body gets. Outside a task (a synchronous call) progress is a
    no-op and asking for input raises :class:`MissingClientCapability` (answered -32021),
    since only a task can wait for input.
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
        """Ask the client (``input_required``) and wait for every answer; keys are unique
        over the task's life. Returns key → the client's result (e.g. an ``ElicitResult``)."""
        raise MissingClientCapability

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


def progress_message(progress: float, total: float | None, message: str | None) -> str:
    """The statusMessage a progress report becomes."""
    if message:
        return message
    return f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"


class RunningTaskContext(TaskContext):
    """The context of a body running as a task under the runner."""

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
    ) -> None:
        super().__init__(arguments=arguments, input_responses=input_responses)
        # The creating request's capabilities: a task never asks for an input kind its
        # client did not declare (None: unknown, e.g. a recovered task; not checked).
        self._client_capabilities = client_capabilities
        self._task_id = task_id
        self._store = store
        self._notifier = notifier
        self.lease = lease

    def __repr__(self) -> str:
        return "RunningTaskContext()"

    @property
    def task_id(self) -> str:
        return self._task_id

    def _check_capabilities(self, requests: Mapping[str, Mapping[str, Any]]) -> None:
        if self._client_capabilities is None:
            return
        for request in requests.values():
            needed = INPUT_CAPABILITY.get(str(request.get("method")))
            if needed is not None and self._client_capabilities.get(needed) is None:
                raise MissingClientCapability({needed: {}})

    def mark_cancelled(self) -> None:
        self._cancelled = True

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await self._store.put_status(
            self._task_id, Progress(progress_message(progress, total, message)), lease=self.lease
        )
        await self._notifier.publish(self._task_id)

    async def request_input(
        self, requests: Mapping[str, Mapping[str, Any]], status_message: str | None = None
    ) -> dict[str, JSONValue]:
        keys = tuple(requests)
        self._check_capabilities(requests)
        async with self._notifier.subscribe(self._task_id) as changes:
            record = await self._store.get(self._task_id, ANY_OWNER)
            # Answers already recorded (a replay after recovery) are not asked again.
            missing = {
                k: ensure_object(v, "input request")
                for k, v in requests.items()
                if k not in record.input_responses
            }
            outstanding = all(k in record.input_requests for k in missing)
            if missing and not (record.status is TaskStatus.INPUT_REQUIRED and outstanding):
                await self._store.put_status(
                    self._task_id, RequireInput(missing, status_message), lease=self.lease
                )
                await self._notifier.publish(self._task_id)
                logger.debug("task %s waits for input", redact(self._task_id))
            while True:
                if all(k in record.input_responses for k in keys):
                    return {k: record.input_responses[k] for k in keys}
                if record.status.is_terminal:
                    raise TaskCancelled
                await changes.wait(INPUT_RECHECK_S)
                record = await self._store.get(self._task_id, ANY_OWNER)

"""Task records rendered as SEP-2663 wire objects: CreateTaskResult, DetailedTask, acks."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue
    from mcp_tasks.domain.models import TaskRecord

#: The extension's identifier: the capability key and the reserved label.
EXTENSION_ID: Final = "io.modelcontextprotocol/tasks"

#: The shortest poll hint given to a young task.
MIN_POLL_INTERVAL_MS: Final = 250
#: The poll hint a tool gets when it configures none.
DEFAULT_POLL_INTERVAL_MS: Final = 2_000

ACK: Final[JSONObject] = {"resultType": "complete"}


def rfc3339(epoch_ms: int) -> str:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds, e.g. ``2026-01-01T00:00:00.000Z``."""
    return f"{_to_the_second(epoch_ms // 1000)}.{epoch_ms % 1000:03d}Z"


@lru_cache(maxsize=1024)
def _to_the_second(epoch_s: int) -> str:
    # Formatting a datetime is most of a poll's rendering, and polls of a task, and the
    # tasks of a busy second, ask for the same few seconds again and again.
    return f"{datetime.fromtimestamp(epoch_s, tz=UTC):%Y-%m-%dT%H:%M:%S}"


def poll_interval_ms(record: TaskRecord, now: int) -> int:
    """An adaptive hint: short while a task is young, growing toward its configured interval.

    Young tasks often finish within a second or two, so clients should look again soon;
    a task that has run for a while is polled at the interval its tool configured.

    ``now`` should be on the store's clock, which wrote the record's times. Against a
    skewed ``now`` the hint stays sane: no task is taken for younger than its own history
    (``last_updated_at - created_at``, which is skew-free), and none for older than the
    configured interval allows, since that caps the hint.
    """
    configured = record.poll_interval_ms or DEFAULT_POLL_INTERVAL_MS
    if record.status.is_terminal:
        return configured
    age = max(now, record.last_updated_at) - record.created_at
    return max(1, min(configured, max(MIN_POLL_INTERVAL_MS, age // 2)))


def _task_fields(record: TaskRecord, now: int, result_type: str | None = None) -> JSONObject:
    """The task fields of ``record``, after ``resultType`` when it is given: one dict, built
    in the wire's key order."""
    body: JSONObject = {} if result_type is None else {"resultType": result_type}
    body["taskId"] = record.task_id
    body["status"] = record.status.value
    body["createdAt"] = rfc3339(record.created_at)
    body["lastUpdatedAt"] = rfc3339(record.last_updated_at)
    body["ttlMs"] = record.ttl_ms  # the key is required; null means unlimited
    body["pollIntervalMs"] = poll_interval_ms(record, now)
    if record.status_message is not None:
        body["statusMessage"] = record.status_message
    return body


def create_task_result(record: TaskRecord, now: int) -> JSONObject:
    """``CreateTaskResult``: flat task fields with ``resultType: "task"``; never a result,
    error, input requests or request state (those belong to ``tasks/get``)."""
    return _task_fields(record, now, "task")


def detailed_task(record: TaskRecord, now: int, result_type: str | None = None) -> JSONObject:
    """``DetailedTask``: the task fields plus the one field its status carries (after
    ``resultType`` when it is given)."""
    body = _task_fields(record, now, result_type)
    match record.status:
        case TaskStatus.INPUT_REQUIRED:
            requests: dict[str, JSONValue] = dict(record.input_requests)
            body["inputRequests"] = requests
        case TaskStatus.COMPLETED:
            body["result"] = inlined_result(record.result or {})
        case TaskStatus.FAILED:
            body["error"] = record.error or {"code": -32603, "message": "Internal error"}
        case _:
            pass
    return body


def get_task_result(record: TaskRecord, now: int) -> JSONObject:
    """``GetTaskResult``: a ``DetailedTask`` with ``resultType: "complete"``."""
    return detailed_task(record, now, "complete")


_RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"


def inlined_result(result: JSONObject) -> JSONObject:
    """The stored tool result as inlined on a completed task: the ``CallToolResult`` the call
    would have returned, so ``resultType: "complete"`` (a 2026-07-28 client decodes it as one
    and rejects it without; stored results carry none, so it is set here, for old rows too),
    and no v1 related-task ``_meta``. A tool's error result (``isError``) is one as well."""
    body: JSONObject = {**result, "resultType": "complete"}
    meta = body.get("_meta")
    if isinstance(meta, dict) and _RELATED_TASK_META in meta:
        body["_meta"] = {k: v for k, v in meta.items() if k != _RELATED_TASK_META}
    return body

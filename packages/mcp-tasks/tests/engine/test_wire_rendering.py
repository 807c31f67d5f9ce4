"""Records rendered as SEP-2663 wire objects."""

from __future__ import annotations

import re
from dataclasses import replace

from mcp_tasks import TaskStatus
from mcp_tasks.domain.models import TaskRecord
from mcp_tasks.engine.wire import (
    MIN_POLL_INTERVAL_MS,
    create_task_result,
    detailed_task,
    get_task_result,
    poll_interval_ms,
    rfc3339,
)

RELATED_TASK = "io.modelcontextprotocol/related-task"
T0 = 1_767_225_600_123  # 2026-01-01T00:00:00.123Z


def record(**changes: object) -> TaskRecord:
    base = TaskRecord(
        task_id="tid",
        owner=None,
        status=TaskStatus.WORKING,
        revision=0,
        created_at=T0,
        last_updated_at=T0,
        ttl_ms=60_000,
        expires_at=T0 + 60_000,
        poll_interval_ms=5_000,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_timestamps_are_rfc3339_utc_with_milliseconds() -> None:
    """Epoch ms render as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    assert rfc3339(T0) == "2026-01-01T00:00:00.123Z"
    assert rfc3339(5) == "1970-01-01T00:00:00.005Z"


def test_create_result_is_flat_and_bare() -> None:
    """CreateTaskResult: resultType task, the task fields, none of the status payloads."""
    done = record(status=TaskStatus.COMPLETED, result={"content": []})
    body = create_task_result(done, T0)
    assert body["resultType"] == "task"
    assert {
        "result",
        "error",
        "inputRequests",
        "requestState",
        "task",
        "ttl",
        "pollInterval",
    }.isdisjoint(body)
    assert re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$", str(body["createdAt"]))


def test_ttl_key_is_always_present() -> None:
    """ttlMs is required on the wire: null when unlimited."""
    body = get_task_result(record(ttl_ms=None, expires_at=None), T0)
    assert "ttlMs" in body
    assert body["ttlMs"] is None


def test_each_status_carries_only_its_field() -> None:
    """input_required → inputRequests; completed → result; failed → error; others nothing."""
    ask = {"k": {"method": "elicitation/create", "params": {}}}
    cases = {
        TaskStatus.WORKING: set(),
        TaskStatus.INPUT_REQUIRED: {"inputRequests"},
        TaskStatus.COMPLETED: {"result"},
        TaskStatus.FAILED: {"error"},
        TaskStatus.CANCELLED: set(),
    }
    for status, expected in cases.items():
        body = get_task_result(
            record(
                status=status,
                input_requests=ask if status is TaskStatus.INPUT_REQUIRED else {},
                result={"content": []} if status is TaskStatus.COMPLETED else None,
                error={"code": -1, "message": "m"} if status is TaskStatus.FAILED else None,
            ),
            T0,
        )
        assert body["resultType"] == "complete"
        assert {"inputRequests", "result", "error"} & set(body) == expected


def test_inlined_result_is_a_complete_call_tool_result() -> None:
    """The inlined result is the CallToolResult the call would have returned: resultType
    ``complete`` (a 2026-07-28 client rejects one without it), whatever the stored row
    carries, and no v1 related-task _meta; the same in ``tasks/get`` and in the
    ``DetailedTask`` a ``notifications/tasks`` carries."""
    stored_without = {"content": [], "_meta": {RELATED_TASK: {"taskId": "x"}, "keep": 1}}
    stored_with = {**stored_without, "resultType": "input_required"}
    for stored in (stored_without, stored_with):
        task = record(status=TaskStatus.COMPLETED, result=stored)
        expected = {"resultType": "complete", "content": [], "_meta": {"keep": 1}}
        assert get_task_result(task, T0)["result"] == expected
        assert detailed_task(task, T0)["result"] == expected


def test_a_tool_error_is_inlined_as_a_complete_result() -> None:
    """A tool's own error (``isError``) completes the task; its result is a CallToolResult
    with resultType ``complete`` too."""
    error = {"content": [{"type": "text", "text": "no"}], "isError": True}
    body = get_task_result(record(status=TaskStatus.COMPLETED, result=error), T0)
    assert body["status"] == "completed"
    assert body["result"] == {**error, "resultType": "complete"}


def test_a_failed_task_carries_a_jsonrpc_error_and_no_result() -> None:
    """A failed task's ``error`` is the JSON-RPC error object, with no ``result`` beside it."""
    failed = record(status=TaskStatus.FAILED, error={"code": -32603, "message": "m"})
    body = get_task_result(failed, T0)
    assert body["error"] == {"code": -32603, "message": "m"}
    assert "result" not in body


def test_poll_interval_grows_from_short_to_configured() -> None:
    """Young tasks get a short hint; older ones the tool's interval, never more."""
    task = record()
    young = poll_interval_ms(task, T0)
    older = poll_interval_ms(task, T0 + 4_000)
    old = poll_interval_ms(task, T0 + 600_000)
    assert young == MIN_POLL_INTERVAL_MS
    assert young < older < old
    assert old == 5_000
    assert poll_interval_ms(record(poll_interval_ms=100), T0) == 100


def test_poll_interval_with_a_clock_behind_the_store_follows_the_record_history() -> None:
    """A ``now`` behind the store's clock (even before the task was created) never makes a
    task look younger than its own history: an 8 s old record is hinted as 8 s old."""
    task = record(last_updated_at=T0 + 8_000)
    behind = poll_interval_ms(task, T0 - 600_000)
    assert behind == poll_interval_ms(task, T0 + 8_000) == 4_000
    assert poll_interval_ms(record(), T0 - 600_000) == MIN_POLL_INTERVAL_MS


def test_poll_interval_with_a_clock_ahead_of_the_store_is_capped() -> None:
    """A ``now`` far ahead of the store's clock gives at most the configured interval."""
    assert poll_interval_ms(record(), T0 + 10**12) == 5_000

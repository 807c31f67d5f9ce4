"""A TaskRecord as one table row and back: selection columns plus one JSON text payload."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_tasks.domain.jsonsafe import JSONObject, dumps, loads
from mcp_tasks.domain.models import Claim, RecordedEvent, TaskRecord, WorkSpec
from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from mcp_tasks_sql.connection import Row


def to_row(record: TaskRecord) -> dict[str, Any]:
    """The column values of ``record`` (without ``row_version``, which the store manages)."""
    claim = record.claim
    payload: JSONObject = {
        "poll_interval_ms": record.poll_interval_ms,
        "status_message": record.status_message,
        "input_requests": dict(record.input_requests),
        "input_responses": dict(record.input_responses),
        "asked_inputs": dict(record.asked_inputs),
        "result": record.result,
        "error": record.error,
        "work": None if record.work is None else record.work.to_json(),
        "attempt": record.attempt,
        "claim": None
        if claim is None
        else {"worker_id": claim.worker_id, "token": claim.token, "expires_at": claim.expires_at},
        "recent_events": [[e.event_id, e.fingerprint, e.revision] for e in record.recent_events],
        "client_capabilities": record.client_capabilities,
    }
    return {
        "task_id": record.task_id,
        "owner": record.owner,
        "status": record.status.value,
        "revision": record.revision,
        "created_at": record.created_at,
        "last_updated_at": record.last_updated_at,
        "ttl_ms": record.ttl_ms,
        "expires_at": record.expires_at,
        "has_work": record.work is not None,
        "retry_at": record.retry_at,
        "generation": record.generation,
        "claim_expires_at": None if claim is None else claim.expires_at,
        "payload": dumps(payload),
    }


def from_row(row: Row) -> TaskRecord:
    """The record a row holds (any mapping of column name to value: a driver's row)."""
    payload = loads(row["payload"])
    claim = payload["claim"]
    work = payload["work"]
    return TaskRecord(
        task_id=row["task_id"],
        owner=row["owner"],
        status=TaskStatus(row["status"]),
        revision=row["revision"],
        created_at=row["created_at"],
        last_updated_at=row["last_updated_at"],
        ttl_ms=row["ttl_ms"],
        expires_at=row["expires_at"],
        poll_interval_ms=payload["poll_interval_ms"],
        status_message=payload["status_message"],
        input_requests=payload["input_requests"],
        input_responses=payload["input_responses"],
        asked_inputs=asked_inputs(payload),
        result=payload["result"],
        error=payload["error"],
        work=None if work is None else WorkSpec.from_json(work),
        attempt=payload["attempt"],
        retry_at=row["retry_at"],
        generation=row["generation"],
        claim=None
        if claim is None
        else Claim(claim["worker_id"], claim["token"], claim["expires_at"]),
        recent_events=tuple(RecordedEvent(e, f, r) for e, f, r in payload["recent_events"]),
        # Absent from rows written before the field existed: unknown, so not checked.
        client_capabilities=payload.get("client_capabilities"),
    )


def asked_inputs(payload: JSONObject) -> dict[str, str]:
    """Input keys → request digests; rows written before digests were kept list the keys
    only (``used_input_keys``), whose digests are unknown (empty)."""
    asked = payload.get("asked_inputs")
    if isinstance(asked, dict):
        return {key: str(digest) for key, digest in asked.items()}
    keys = payload.get("used_input_keys")
    return {str(key): "" for key in keys} if isinstance(keys, list) else {}

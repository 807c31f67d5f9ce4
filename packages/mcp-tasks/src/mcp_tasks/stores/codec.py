"""A TaskRecord as columns and a JSON payload, and back.

A record splits into *columns* (the scalars a backend selects on: status, times, owner,
generation, …; :func:`columns_of`) and a *payload* (everything else, one JSON object the
backend never looks into; :func:`payload_of`); :func:`record_from` joins the two again,
exactly (``==``). The SQL stores keep the columns as table columns and the payload as JSON
text (``mcp_tasks_sql.codec``); the MongoDB store keeps the columns as document fields and
the payload as one JSON string (``mcp_tasks_mongodb.codec``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from mcp_tasks.domain.models import Claim, RecordedEvent, TaskRecord, WorkSpec
from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.jsonsafe import JSONObject


class Columns(Protocol):
    """Column values read by name: a driver's row, a decoded JSON object."""

    def __getitem__(self, key: str, /) -> Any: ...


def columns_of(record: TaskRecord) -> dict[str, Any]:
    """The selection columns of ``record``: JSON scalars (str, int, bool or ``None``)."""
    claim = record.claim
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
        # What a claim selects by (S-CLAIM.4); the work itself is in the payload.
        "work_type": None if record.work is None else record.work.type,
    }


def payload_of(record: TaskRecord) -> JSONObject:
    """Every field of ``record`` that is not a column, as one JSON object."""
    claim = record.claim
    return {
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


def record_from(columns: Columns, payload: Mapping[str, Any]) -> TaskRecord:
    """The record that ``columns`` (any mapping of column name to value: a driver's row,
    a decoded JSON object) and its decoded ``payload`` hold."""
    claim = payload["claim"]
    work = payload["work"]
    return TaskRecord(
        task_id=columns["task_id"],
        owner=columns["owner"],
        status=TaskStatus(columns["status"]),
        revision=columns["revision"],
        created_at=columns["created_at"],
        last_updated_at=columns["last_updated_at"],
        ttl_ms=columns["ttl_ms"],
        expires_at=columns["expires_at"],
        poll_interval_ms=payload["poll_interval_ms"],
        status_message=payload["status_message"],
        input_requests=payload["input_requests"],
        input_responses=payload["input_responses"],
        asked_inputs=dict(payload["asked_inputs"]),
        result=payload["result"],
        error=payload["error"],
        work=None if work is None else WorkSpec.from_json(work),
        attempt=payload["attempt"],
        retry_at=columns["retry_at"],
        generation=columns["generation"],
        claim=None
        if claim is None
        else Claim(claim["worker_id"], claim["token"], claim["expires_at"]),
        recent_events=tuple(RecordedEvent(e, f, r) for e, f, r in payload["recent_events"]),
        client_capabilities=payload["client_capabilities"],
    )

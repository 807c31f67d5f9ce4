"""The SQL row codec: a record round-trips exactly, and rows written by older versions
(before asked_inputs and client_capabilities existed) still read."""

from __future__ import annotations

import json

from mcp_tasks.domain.models import Claim, RecordedEvent, TaskRecord, WorkSpec, input_digest
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks_sql.codec import from_row, to_row

ELICIT = {"method": "elicitation/create", "params": {"message": "Proceed?"}}


def full_record() -> TaskRecord:
    return TaskRecord(
        task_id="t1",
        owner="alice",
        status=TaskStatus.INPUT_REQUIRED,
        revision=3,
        created_at=1_000,
        last_updated_at=1_003,
        ttl_ms=60_000,
        expires_at=61_000,
        poll_interval_ms=500,
        status_message="Waiting",
        input_requests={"b": ELICIT},
        input_responses={"a": {"action": "accept", "content": {"v": -0.0}}},
        asked_inputs={"a": input_digest(ELICIT), "b": input_digest(ELICIT)},
        work=WorkSpec("job", {"n": 1}, "key", (0, 500)),
        attempt=1,
        generation=2,
        claim=Claim("w1", "token", 31_000),
        recent_events=(RecordedEvent("e1", "f" * 32, 2),),
        client_capabilities={"elicitation": {"form": {}}, "x": [1, 2.5, None]},
    )


def test_a_record_round_trips_exactly() -> None:
    """to_row then from_row gives back an equal record, every field included."""
    record = full_record()
    assert from_row(to_row(record)) == record


def test_an_old_payload_with_only_used_input_keys_reads() -> None:
    """A row written before asked_inputs (a list used_input_keys) and before
    client_capabilities reads with each key's digest unknown (empty) and no capabilities;
    writing it back stores the new form, which reads the same again."""
    row = to_row(full_record())
    payload = json.loads(row["payload"])
    del payload["asked_inputs"], payload["client_capabilities"]
    payload["used_input_keys"] = ["a", "b"]
    old = {**row, "payload": json.dumps(payload)}
    record = from_row(old)
    assert dict(record.asked_inputs) == {"a": "", "b": ""}
    assert record.used_input_keys == {"a", "b"}
    assert record.client_capabilities is None
    again = to_row(record)
    assert "used_input_keys" not in json.loads(again["payload"])
    assert from_row(again) == record


def test_a_payload_without_any_input_keys_reads_empty() -> None:
    """Neither asked_inputs nor used_input_keys: no keys were ever asked."""
    row = to_row(full_record())
    payload = json.loads(row["payload"])
    del payload["asked_inputs"]
    assert dict(from_row({**row, "payload": json.dumps(payload)}).asked_inputs) == {}

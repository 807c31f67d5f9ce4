"""The SQL row codec: a record round-trips exactly, and a row read again unchanged reuses its
decoded record."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from mcp_tasks.domain.models import Claim, RecordedEvent, TaskRecord, WorkSpec, input_digest
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks_sql.codec import RowDecoder, from_row, to_row

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


def read_row(record: TaskRecord, now_ms: int = 5) -> sqlite3.Row:
    """``record`` as a driver returns a row of the read statement: ``now_ms`` first, then
    the task's columns (``row_version`` among them), by name and in order."""
    values = {"now_ms": now_ms, **to_row(record), "row_version": 7}
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    columns = ", ".join(f":{name} AS {name}" for name in values)
    row: sqlite3.Row = conn.execute(f"SELECT {columns}", values).fetchone()
    conn.close()
    return row


def test_the_row_decoder_gives_an_unchanged_row_the_record_it_decoded_before() -> None:
    """The same task read twice (a new row object each time, a later now_ms): one decoded
    record, equal to from_row's."""
    decode = RowDecoder()
    first = decode(read_row(full_record(), now_ms=5))
    assert first == full_record()
    assert decode(read_row(full_record(), now_ms=6)) is first


def test_the_row_decoder_decodes_a_row_changed_in_any_column() -> None:
    """Each field that a column or the payload holds, changed alone, gives the changed
    record."""
    decode = RowDecoder()
    record = full_record()
    decode(read_row(record))
    changes: list[dict[str, object]] = [
        {"task_id": "t2"},
        {"owner": "bob"},
        {"status": TaskStatus.WORKING},
        {"revision": 4},
        {"created_at": 999},
        {"last_updated_at": 1_004},
        {"ttl_ms": 60_001},
        {"expires_at": 61_001},
        {"retry_at": 2_000},
        {"generation": 3},
        {"claim": Claim("w1", "token", 31_001)},  # claim_expires_at and the payload
        {"status_message": "Still waiting"},  # the payload alone
    ]
    for change in changes:
        changed = replace(record, **change)  # type: ignore[arg-type]
        assert decode(read_row(changed)) == changed


def test_the_row_decoder_remembers_only_its_size_in_rows() -> None:
    """Past ``size`` distinct rows the oldest is forgotten: decoded again, a new record."""
    decode = RowDecoder(size=2)
    records = [replace(full_record(), revision=n) for n in range(3)]
    first = decode(read_row(records[0]))
    decode(read_row(records[1]))
    assert decode(read_row(records[0])) is first
    decode(read_row(records[2]))
    again = decode(read_row(records[0]))
    assert again == first
    assert again is not first


def test_the_row_decoder_holds_no_row_with_a_large_payload() -> None:
    """A payload over ``max_payload`` characters (a large result) is decoded on every read,
    never kept: the decoder's memory stays bounded by its size times that limit."""
    decode = RowDecoder(max_payload=len(to_row(full_record())["payload"]) - 1)
    first = decode(read_row(full_record()))
    again = decode(read_row(full_record()))
    assert again == first
    assert again is not first

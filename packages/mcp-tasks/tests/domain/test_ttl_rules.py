"""The TTL rules as pure functions: leases and ends move expires_at (and ttl_ms) later only."""

from __future__ import annotations

import pytest

from mcp_tasks import (
    Complete,
    InvalidArgument,
    NewTask,
    Progress,
    Retry,
    StoreOptions,
    TaskStatus,
    WorkSpec,
)
from mcp_tasks.domain import rules

NOW = 1_000_000
JOB = WorkSpec("job", retry_delays_ms=(0,))
BOOM = {"code": -32603, "message": "boom"}


def test_held_until_only_moves_expiry_later_and_keeps_ttl_in_step() -> None:
    """expires_at = max(expires_at, until); ttl_ms follows; no TTL stays no TTL."""
    record = rules.new_record(NewTask("t", ttl_ms=1_000), NOW)
    later = rules.held_until(record, NOW + 5_000)
    assert (later.expires_at, later.ttl_ms) == (NOW + 5_000, 5_000)
    assert rules.held_until(later, NOW + 10) is later
    timeless = rules.new_record(NewTask("u", ttl_ms=None), NOW)
    assert rules.held_until(timeless, NOW + 5_000) is timeless


def test_claim_and_renew_hold_the_task_for_the_lease() -> None:
    """A claim and a renew keep the task at least until the lease's end."""
    record = rules.new_record(NewTask("t", ttl_ms=1_000, work=JOB), NOW)
    claimed = rules.apply_claim(record, "w", 30_000, NOW + 10)
    assert claimed.record.expires_at == claimed.lease.expires_at == NOW + 30_010
    assert claimed.record.ttl_ms == 30_010
    renewed = rules.apply_renew(claimed.record, claimed.lease, 30_000, NOW + 20_000)
    assert renewed.record.expires_at == renewed.lease.expires_at == NOW + 50_000
    assert not renewed.record.is_expired(NOW + 49_999)


def test_an_end_keeps_the_result_for_the_retention_and_only_an_end_does() -> None:
    """Complete, a Retry with no delay left and cancel extend to the end + retention;
    progress and a Retry with a delay left do not; 0 turns it off."""
    record = rules.new_record(NewTask("t", ttl_ms=1_000, work=JOB), NOW)
    at = NOW + 900
    progressed = rules.apply_put(record, Progress("p"), at, result_retention_ms=60_000)
    assert progressed.record.expires_at == NOW + 1_000
    retried = rules.apply_put(record, Retry(BOOM), at, result_retention_ms=60_000)
    assert retried.record.status is TaskStatus.WORKING
    assert retried.record.expires_at == NOW + 1_000
    failed = rules.apply_put(retried.record, Retry(BOOM), at + 1, result_retention_ms=60_000)
    assert failed.record.status is TaskStatus.FAILED
    assert failed.record.expires_at == at + 1 + 60_000
    done = rules.apply_put(record, Complete({}), at, result_retention_ms=60_000)
    assert done.record.expires_at == at + 60_000
    assert done.record.ttl_ms == done.record.expires_at - done.record.created_at
    cancelled = rules.apply_cancel(record, None, at, result_retention_ms=60_000)
    assert cancelled.record.expires_at == at + 60_000
    assert cancelled.record.status_message is None
    off = rules.apply_put(record, Complete({}), at, result_retention_ms=0)
    assert off.record.expires_at == NOW + 1_000


@pytest.mark.parametrize("field", ["terminal_retention_ms", "result_retention_ms"])
@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_retentions_must_be_non_negative_integers(field: str, value: object) -> None:
    """StoreOptions refuses a negative, fractional or boolean retention."""
    with pytest.raises(InvalidArgument):
        StoreOptions(**{field: value})  # type: ignore[arg-type]

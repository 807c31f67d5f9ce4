"""The rules `stats` counts by, on their edges, and `tally` over records."""

from __future__ import annotations

from dataclasses import replace

from mcp_tasks import StoreOptions, TaskRecord, TaskStatus, WorkSpec
from mcp_tasks.domain import rules
from mcp_tasks.domain.models import Claim
from mcp_tasks.stores.stats import tally

NOW = 1_700_000_000_000
HOUR = rules.EXPIRY_HORIZON_MS
BASE = TaskRecord(
    "t", None, TaskStatus.WORKING, 0, NOW - 10, NOW - 10, None, None, work=WorkSpec("job")
)


def claimed(until: int) -> TaskRecord:
    return replace(BASE, claim=Claim("w", "token", until), generation=1)


def test_a_lease_is_live_until_its_end_and_lapsed_from_it() -> None:
    """A claim ending after now holds the task; ending at now it has lapsed (claimable)."""
    assert rules.is_claimed(claimed(NOW + 1), NOW)
    assert not rules.lease_lapsed(claimed(NOW + 1), NOW)
    assert rules.lease_lapsed(claimed(NOW), NOW)
    assert not rules.is_claimed(claimed(NOW), NOW)
    finished = replace(claimed(NOW + 1), status=TaskStatus.COMPLETED)
    assert not rules.is_claimed(finished, NOW)  # a finished task keeps its claim, inert
    assert not rules.lease_lapsed(replace(claimed(NOW), work=None), NOW)  # manual: no recovery


def test_a_retry_is_due_at_its_time_and_pending_before() -> None:
    """retry_at == now is due (claimable); one ms later it is pending."""
    assert rules.retry_due(replace(BASE, retry_at=NOW), NOW)
    assert not rules.retry_pending(replace(BASE, retry_at=NOW), NOW)
    assert rules.retry_pending(replace(BASE, retry_at=NOW + 1), NOW)
    assert not rules.retry_due(replace(BASE, retry_at=NOW + 1), NOW)
    assert not rules.retry_due(BASE, NOW)  # never retried: ready, not a retry


def test_expiring_within_the_hour_is_unexpired_and_at_most_an_hour_away() -> None:
    """Expires in (now, now + an hour]: counted; at now (expired) or beyond: not."""
    for expires_at, counted in ((NOW, False), (NOW + 1, True), (NOW + HOUR, True)):
        assert rules.expires_within(replace(BASE, expires_at=expires_at), NOW, HOUR) is counted
    assert not rules.expires_within(replace(BASE, expires_at=NOW + HOUR + 1), NOW, HOUR)
    assert not rules.expires_within(BASE, NOW, HOUR)  # no TTL


def test_tally_counts_an_expired_task_only_as_a_row() -> None:
    """An expired task is a row the reaper has not deleted, and nothing else; the owners'
    counts name no owner, are largest first and leave ownerless tasks out."""
    records = [
        replace(BASE, task_id="a", owner="x", expires_at=NOW, ttl_ms=10),  # expired
        replace(BASE, task_id="b", owner="x"),
        replace(BASE, task_id="c", owner="y", created_at=NOW - 20),
        replace(BASE, task_id="d", owner="y", status=TaskStatus.INPUT_REQUIRED),
        replace(BASE, task_id="e", owner=None, status=TaskStatus.FAILED),
        replace(BASE, task_id="f", owner=None),  # active, and no owner's
    ]
    stats = tally(records, NOW, StoreOptions(max_rows=7, max_active_per_owner=2))
    assert (stats.rows, stats.live_rows, stats.expired, stats.active) == (6, 5, 1, 4)
    assert (stats.owners, stats.busiest_owners) == (2, (2, 1))
    assert stats.oldest_working_age_ms == 20
    assert (stats.max_rows, stats.max_active_per_owner) == (7, 2)

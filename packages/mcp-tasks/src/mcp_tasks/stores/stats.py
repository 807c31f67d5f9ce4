"""What a store's optional ``stats()`` answers ``mcp-tasks stats``: aggregates of its tasks,
and :func:`tally`, the reference that computes them from records with the pure rules.

Counts only. A :class:`StoreStats` holds no task id (ids are bearer capabilities) and no
owner: owners are principals, not capabilities, but naming them would list who uses the
server, which no Store operation does (``S-NOLIST``); the per-owner figures are the
largest counts, unnamed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from mcp_tasks.domain import rules
from mcp_tasks.domain.states import LIVE, TaskStatus

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from mcp_tasks.domain.models import StoreOptions, TaskRecord

#: How many per-owner counts ``stats`` gives: the largest, the ones nearest the owner cap.
BUSIEST_OWNERS: Final = 5

#: The counts a store that counts on its server names, beside ``rows``, ``status_<status>``
#: and ``oldest_working_created_at`` (:func:`from_counts`); each counts the tasks one rule
#: accepts, as :class:`StoreStats` says.
COUNTED: Final = (
    "claimed",
    "lease_lapsed",
    "retry_due",
    "retry_pending",
    "expiring_soon",
    "waiting_unclaimed",
)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """One store's tasks at one instant of its clock (``now``), counted as the rules of
    :mod:`mcp_tasks.domain.rules` classify them. An expired task counts only in ``rows``
    (and so in :attr:`expired`): like every operation, the other figures treat it as gone.
    """

    now: int
    """The store's clock when it counted (epoch ms)."""
    rows: int
    """Every row the store keeps, expired ones the reaper has not deleted yet included."""
    by_status: Mapping[TaskStatus, int]
    """Unexpired tasks per status (every status present, 0 included)."""
    claimed: int
    """Active tasks a live lease holds (``rules.is_claimed``): running somewhere."""
    lease_lapsed: int
    """Tasks whose claim ran out and that wait for a recovery (``rules.lease_lapsed``)."""
    retry_due: int
    """Retries whose delay has passed, waiting for a recovery (``rules.retry_due``)."""
    retry_pending: int
    """Active tasks waiting for a retry's delay to pass (``rules.retry_pending``)."""
    oldest_working_created_at: int | None
    """``created_at`` of the oldest unexpired ``working`` task, or ``None``."""
    expiring_soon: int
    """Unexpired tasks that expire within ``rules.EXPIRY_HORIZON_MS`` (an hour)."""
    waiting_unclaimed: int
    """Claimable tasks created ``rules.UNCLAIMED_AFTER_MS`` (30 s) or more ago
    (``rules.waits_unclaimed``): work no running process has claimed lately, because
    none serves its tool or every one runs its most bodies."""
    owners: int
    """Owners with an active task (principals: ownerless tasks are no owner's)."""
    busiest_owners: tuple[int, ...]
    """The largest per-owner counts of active tasks, largest first, at most
    :data:`BUSIEST_OWNERS`: what the per-owner cap counts (``rules.is_active``; ownerless
    tasks are not held to it, :meth:`StoreOptions.owner_cap`)."""
    max_rows: int | None = None
    """The store's row cap (``StoreOptions.max_rows``)."""
    max_active_per_owner: int | None = None
    """The store's per-owner cap (``StoreOptions.max_active_per_owner``)."""

    @property
    def live_rows(self) -> int:
        """The rows the row cap counts (``rules.counts_toward_cap``)."""
        return sum(self.by_status.values())

    @property
    def expired(self) -> int:
        """Rows past their TTL that the reaper has not deleted yet."""
        return self.rows - self.live_rows

    @property
    def active(self) -> int:
        """Tasks not finished (``rules.is_active``)."""
        return sum(self.by_status[status] for status in LIVE)

    @property
    def unclaimed(self) -> int:
        """Active tasks no live lease holds: waiting for input, a claim, a retry, or driven
        from outside (manual mode)."""
        return self.active - self.claimed

    @property
    def oldest_working_age_ms(self) -> int | None:
        """How long the oldest unexpired ``working`` task has existed, or ``None``."""
        created = self.oldest_working_created_at
        return None if created is None else self.now - created


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """What a store keeps counted as it writes: its rows, and its unexpired tasks per
    status, at one instant of its clock. What the store gauges export; a store that offers
    :class:`~mcp_tasks.stores.abilities.CountsReader` answers it without reading the tasks,
    so it costs the same at any size. The same figures as :class:`StoreStats` gives."""

    now: int
    """The store's clock when it counted (epoch ms)."""
    rows: int
    """Every row the store keeps, expired ones the reaper has not deleted yet included."""
    by_status: Mapping[TaskStatus, int]
    """Unexpired tasks per status (every status present, 0 included)."""
    max_rows: int | None = None
    """The store's row cap (``StoreOptions.max_rows``)."""

    @property
    def live_rows(self) -> int:
        """The rows the row cap counts (``rules.counts_toward_cap``)."""
        return sum(self.by_status.values())

    @property
    def expired(self) -> int:
        """Rows past their TTL that the reaper has not deleted yet."""
        return self.rows - self.live_rows

    @property
    def active(self) -> int:
        """Tasks not finished (``rules.is_active``)."""
        return sum(self.by_status[status] for status in LIVE)


def counts_of(stats: StoreStats) -> StoreCounts:
    """The counts among ``stats``' figures (for a store that offers ``stats()`` only)."""
    return StoreCounts(
        now=stats.now, rows=stats.rows, by_status=stats.by_status, max_rows=stats.max_rows
    )


def count(records: Iterable[TaskRecord], now: int, options: StoreOptions) -> StoreCounts:
    """The counts of ``records`` at ``now``: the reference every store's ``counts()`` agrees
    with (the rules themselves, as :func:`tally` counts them)."""
    rows = 0
    by_status = dict.fromkeys(TaskStatus, 0)
    for record in records:
        rows += 1
        if rules.counts_toward_cap(record, now):
            by_status[record.status] += 1
    return StoreCounts(now=now, rows=rows, by_status=by_status, max_rows=options.max_rows)


def tally(records: Iterable[TaskRecord], now: int, options: StoreOptions) -> StoreStats:
    """The stats of ``records`` at ``now``: the reference every store's ``stats()`` agrees
    with (the memory store and Redis call it; the SQL and MongoDB stores restate its
    rules on the server, each piece checked against its rule)."""
    rows = 0
    by_status = dict.fromkeys(TaskStatus, 0)
    claimed = lapsed = due = pending = soon = unclaimed = 0
    oldest: int | None = None
    per_owner: Counter[str] = Counter()
    for record in records:
        rows += 1
        if not rules.counts_toward_cap(record, now):
            continue
        by_status[record.status] += 1
        claimed += rules.is_claimed(record, now)
        lapsed += rules.lease_lapsed(record, now)
        due += rules.retry_due(record, now)
        pending += rules.retry_pending(record, now)
        soon += rules.expires_within(record, now, rules.EXPIRY_HORIZON_MS)
        unclaimed += rules.waits_unclaimed(record, now)
        if record.owner is not None and rules.is_active(record, now):
            per_owner[record.owner] += 1
        if record.status is TaskStatus.WORKING and (oldest is None or record.created_at < oldest):
            oldest = record.created_at
    return StoreStats(
        now=now,
        rows=rows,
        by_status=by_status,
        claimed=claimed,
        lease_lapsed=lapsed,
        retry_due=due,
        retry_pending=pending,
        oldest_working_created_at=oldest,
        expiring_soon=soon,
        waiting_unclaimed=unclaimed,
        owners=len(per_owner),
        busiest_owners=busiest(per_owner.values()),
        max_rows=options.max_rows,
        max_active_per_owner=options.max_active_per_owner,
    )


def busiest(counts: Iterable[int]) -> tuple[int, ...]:
    """The :data:`BUSIEST_OWNERS` largest of per-owner ``counts``, largest first."""
    return tuple(sorted(counts, reverse=True)[:BUSIEST_OWNERS])


class Counts(Protocol):
    """Counts read by name: a driver's row, a document."""

    def __getitem__(self, key: str, /) -> Any: ...


def from_counts(
    counts: Counts,
    *,
    now: int,
    owners: int,
    busiest_owners: Iterable[int],
    options: StoreOptions,
) -> StoreStats:
    """The stats a server counted: ``counts`` names ``rows``, ``status_<status>`` for each
    status, each of :data:`COUNTED` and ``oldest_working_created_at``; ``busiest_owners``
    are per-owner counts (the largest :data:`BUSIEST_OWNERS` are kept)."""
    return StoreStats(
        now=now,
        rows=counts["rows"],
        by_status={status: counts[f"status_{status.value}"] for status in TaskStatus},
        claimed=counts["claimed"],
        lease_lapsed=counts["lease_lapsed"],
        retry_due=counts["retry_due"],
        retry_pending=counts["retry_pending"],
        oldest_working_created_at=counts["oldest_working_created_at"],
        expiring_soon=counts["expiring_soon"],
        waiting_unclaimed=counts["waiting_unclaimed"],
        owners=owners,
        busiest_owners=busiest(busiest_owners),
        max_rows=options.max_rows,
        max_active_per_owner=options.max_active_per_owner,
    )

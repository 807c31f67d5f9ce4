"""Gauges of a store's state (tasks by status, rows against the row cap), read from its
optional ``counts()`` (else the counts among its ``stats()``) in the background, at most
once an interval, and only while an exporter collects them.

A store that offers ``counts()`` (:class:`~mcp_tasks.stores.abilities.CountsReader`: SQLite,
Postgres, Redis) answers from counters its writes keep, in one read that costs the same at
any number of tasks (Redis: a few ``ZCOUNT``; SQL: the counter rows and the expired rows the
reaper has not deleted yet), so every serving process may export the gauges: ten processes
reading every 10 s are ten small reads. A store without it answers from ``stats()``, which
may be a whole-table aggregation: there one process (one worker, say) is enough. Either way
the read never runs on a request, never on a collection (an exporter's collection reads the
last reading), and not at all while nothing collects (no SDK, or no metric reader): a
collection marks the gauges wanted, and the background loop reads the store again once the
interval since its last reading is over. Attributes are the backend (``db.system.name``)
and a status: never an id, never an owner.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final

import anyio
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from mcp_tasks.domain.errors import InvalidArgument, MCPTasksError, StoreUnavailable
from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.runtime.logs import Outage
from mcp_tasks.stores.abilities import Configured, CountsReader, StatsReader
from mcp_tasks.stores.observed import backend_name, unobserved
from mcp_tasks.stores.opening import describe_store
from mcp_tasks.stores.stats import counts_of
from mcp_tasks.telemetry import DB_SYSTEM, SCOPE, STATUS, Untraced

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

    from mcp_tasks.stores.protocol import Store
    from mcp_tasks.stores.stats import StoreCounts

__all__ = [
    "MIN_GAUGE_INTERVAL_S",
    "StoreGauges",
    "StoreReading",
    "TelemetryOptions",
    "gauge_interval",
    "store_gauges",
]

logger = logging.getLogger(__name__)

#: The shortest interval between two readings of a store's stats for the gauges.
MIN_GAUGE_INTERVAL_S: Final = 10.0
#: How often the loop looks whether a collection asked for the gauges since its last look.
_WANTED_CHECK_S: Final = 1.0


def gauge_interval(seconds: float | None) -> float | None:
    """``seconds`` as the interval between two readings for the gauges (``None``: none).

    Raises:
        InvalidArgument: below :data:`MIN_GAUGE_INTERVAL_S` (or not a number).
    """
    if seconds is not None and not seconds >= MIN_GAUGE_INTERVAL_S:
        raise InvalidArgument(
            f"the store gauges' interval must be at least {MIN_GAUGE_INTERVAL_S:g} seconds, "
            f"got {seconds:g}"
        )
    return seconds


@dataclass(frozen=True, kw_only=True)
class TelemetryOptions:
    """What a ``Tasks`` exports beyond its spans and counters:
    ``Tasks(telemetry=TelemetryOptions(store_gauges_s=60))``.

    ``store_gauges_s``: export gauges of the store's state (tasks by status, rows against
    the row cap) from its ``counts()`` (else its ``stats()``), read in the background at
    most once per that many seconds (at least 10) and only while an exporter collects
    them; ``None`` (the default): none. ``counts()`` is one small read at any table size;
    ``stats()`` may scan the whole table, so where a store has only that, turn the gauges
    on in one process (docs/monitoring.md).

    Raises:
        InvalidArgument: ``store_gauges_s`` below :data:`MIN_GAUGE_INTERVAL_S`.
    """

    store_gauges_s: float | None = None

    def __post_init__(self) -> None:
        gauge_interval(self.store_gauges_s)


class StoreReading:
    """The latest counts of one store for the gauges (``None`` before the first reading
    and after a failed one: a gauge shows a gap, never a stale figure)."""

    def __init__(self, store: Store, read: Callable[[], Awaitable[StoreCounts]]) -> None:
        self.system = backend_name(store)
        self.figures: StoreCounts | None = None
        #: Set by a collection (an exporter's thread), cleared by the next reading.
        self.wanted = False
        self._read = read
        options = store.options if isinstance(store, Configured) else StoreOptions()
        self._timeout_s = options.timeout_ms / 1000
        self._outage = Outage(logger, "reading the store's stats for gauges", describe_store(store))

    async def refresh(self) -> None:
        """Read the store's counts now, bounded by the store's timeout; on failure forget the
        last reading (and say so, as an outage is said)."""
        try:
            with anyio.fail_after(self._timeout_s), Untraced():
                figures = await self._read()
        except (MCPTasksError, TimeoutError) as error:
            self.figures = None
            self._outage.failed(
                error if isinstance(error, MCPTasksError) else StoreUnavailable("timed out")
            )
            return
        self._outage.recovered()
        self.figures = figures

    async def refresh_every(self, interval_s: float) -> None:
        """Read again when a collection wanted the gauges and ``interval_s`` has passed
        since the last reading."""
        last = -math.inf
        while True:
            await anyio.sleep(min(_WANTED_CHECK_S, interval_s))
            if self.wanted and time.monotonic() - last >= interval_s:
                self.wanted = False
                last = time.monotonic()
                await self.refresh()


class StoreGauges:
    """The observable gauges over every store being watched (:meth:`watching`)."""

    def __init__(self, meter: metrics.Meter) -> None:
        self._watched: list[StoreReading] = []
        meter.create_observable_gauge(
            "mcp_tasks.store.tasks",
            callbacks=[self._by_status],
            unit="{task}",
            description="Unexpired tasks in the store, by status",
        )
        meter.create_observable_gauge(
            "mcp_tasks.store.rows.usage",
            callbacks=[self._rows],
            unit="{row}",
            description="Rows the store's row cap counts (unexpired tasks)",
        )
        meter.create_observable_gauge(
            "mcp_tasks.store.rows.limit",
            callbacks=[self._cap],
            unit="{row}",
            description="The store's row cap (absent when it has none)",
        )

    def readings(self) -> list[StoreReading]:
        """Every watched store's reading, each marked wanted: a collection is asking."""
        watched = list(self._watched)
        for reading in watched:
            reading.wanted = True
        return watched

    def _by_status(self, options: CallbackOptions) -> Iterable[Observation]:
        for reading in self.readings():
            figures = reading.figures
            if figures is not None:
                for status, count in figures.by_status.items():
                    yield Observation(count, {DB_SYSTEM: reading.system, STATUS: status.value})

    def _rows(self, options: CallbackOptions) -> Iterable[Observation]:
        for reading in self.readings():
            if reading.figures is not None:
                yield Observation(reading.figures.live_rows, {DB_SYSTEM: reading.system})

    def _cap(self, options: CallbackOptions) -> Iterable[Observation]:
        for reading in self.readings():
            figures = reading.figures
            if figures is not None and figures.max_rows is not None:
                yield Observation(figures.max_rows, {DB_SYSTEM: reading.system})

    @asynccontextmanager
    async def watching(self, store: Store, interval_s: float) -> AsyncIterator[StoreReading | None]:
        """Export ``store``'s gauges while the block runs, read at most once per
        ``interval_s``; a store with neither ``counts()`` nor ``stats()`` exports none
        (``None``)."""
        store = unobserved(store)
        if isinstance(store, CountsReader):
            read: Callable[[], Awaitable[StoreCounts]] = store.counts
        elif isinstance(store, StatsReader):
            read = partial(_counts_in_stats, store)
        else:
            yield None
            return
        reading = StoreReading(store, read)
        self._watched.append(reading)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(reading.refresh_every, interval_s)
                yield reading
                group.cancel_scope.cancel()
        finally:
            self._watched.remove(reading)


async def _counts_in_stats(store: StatsReader) -> StoreCounts:
    """The counts among the store's ``stats()`` (a store that keeps no counters)."""
    return counts_of(await store.stats())


_process_gauges: list[StoreGauges] = []


def store_gauges() -> StoreGauges:
    """The process's gauges, on the global meter (created once: an SDK keeps the first
    instrument of a name and drops a second one's callbacks)."""
    if not _process_gauges:
        _process_gauges.append(StoreGauges(metrics.get_meter(SCOPE)))
    return _process_gauges[0]

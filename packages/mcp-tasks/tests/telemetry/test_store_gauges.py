"""The store gauges (tasks by status, rows against the cap) as OpenTelemetry's SDK collects
them (its in-memory reader, on a meter provider of the test's own): a known population's
figures on memory and SQLite, read in the background only when a collection asked and at
most once per interval, a gap (never a stale figure) when the store fails or hangs, and
nothing at all for a store without ``counts()`` or ``stats()``, or without an SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from mcp_tasks import (
    InvalidArgument,
    MemoryTaskStore,
    RunnerOptions,
    StoreOptions,
    StoreUnavailable,
    Tasks,
    TelemetryOptions,
)
from mcp_tasks.cli import main
from mcp_tasks.domain.clock import system_clock
from mcp_tasks.runtime.gauges import StoreGauges
from mcp_tasks_contract.suite.stats import OPTIONS, populate
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks import Store
    from mcp_tasks.stores.stats import StoreCounts, StoreStats

pytestmark = pytest.mark.anyio

#: The rows gauge of an empty memory store.
EMPTY = [({"db.system.name": "memory"}, 0)]


class Metered:
    """A meter provider of the test's own, its gauges and its reader."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.gauges = StoreGauges(self.provider.get_meter("test"))

    def collect(self) -> dict[str, list[tuple[dict[str, Any], int | float]]]:
        """One collection: each gauge's points as (attributes, value)."""
        found: dict[str, list[tuple[dict[str, Any], int | float]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = [
                        (dict(point.attributes or {}), point.value)  # type: ignore[union-attr]
                        for point in metric.data.data_points
                    ]
        return found


async def wait_past(epoch_ms: int) -> None:
    """The stores keep the system clock here: wait until it is past ``epoch_ms``."""
    for _ in range(1_000):
        if system_clock() > epoch_ms:
            return
        await anyio.sleep(0.001)
    raise AssertionError("the system clock did not move")


class StatsOnly:
    """A memory store that counts with ``stats()`` only (no ``counts()``: a scan of its
    tasks), whose readings count themselves (``calls``) and can fail or hang."""

    def __init__(self, options: StoreOptions | None = None) -> None:
        self.inner = MemoryTaskStore(options)
        self.options = self.inner.options
        self.calls = 0
        self.failing = False
        self.hanging = False

    def __getattr__(self, name: str) -> Any:
        if name == "counts":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def _reading(self) -> None:
        self.calls += 1
        if self.failing:
            raise StoreUnavailable("the database is down")
        if self.hanging:
            await anyio.sleep_forever()

    async def stats(self) -> StoreStats:
        await self._reading()
        return await self.inner.stats()


class Counted(StatsOnly):
    """The same store with ``counts()`` too (what the gauges read then)."""

    async def counts(self) -> StoreCounts:
        await self._reading()
        return await self.inner.counts()


@pytest.fixture(params=["memory", "sqlite"])
async def populated(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The contract's stats population (row cap 50) in a memory or a SQLite store."""
    store: Store
    if request.param == "memory":
        store = MemoryTaskStore(OPTIONS)
    else:
        store = SQLiteTaskStore(tmp_path / "tasks.db", OPTIONS)
    await populate(store, wait_past)
    yield store
    await store.close()


async def read_once(reading: Any) -> None:
    """Wait for the background loop's next reading."""
    for _ in range(1_000):
        if reading.figures is not None:
            return
        await anyio.sleep(0.01)
    raise AssertionError("no reading in 10 s")


async def test_a_known_population_is_exported_by_status_and_against_the_cap(
    populated: Store,
) -> None:
    """Tasks by status (expired ones not counted), the rows the cap counts and the cap,
    each labelled with the backend only: no id, no owner."""
    metered = Metered()
    async with metered.gauges.watching(populated, 0.05) as reading:
        assert reading is not None
        assert metered.collect() == {}  # nothing read yet: the first collection asks
        await read_once(reading)
        exported = metered.collect()
    system = "memory" if isinstance(populated, MemoryTaskStore) else "sqlite"
    by_status = {
        attributes["mcp_tasks.task.status"]: value
        for attributes, value in exported["mcp_tasks.store.tasks"]
    }
    assert by_status == {
        "working": 6,
        "input_required": 1,
        "completed": 1,
        "failed": 1,
        "cancelled": 1,
    }
    for attributes, _ in exported["mcp_tasks.store.tasks"]:
        assert set(attributes) == {"db.system.name", "mcp_tasks.task.status"}
        assert attributes["db.system.name"] == system
    assert exported["mcp_tasks.store.rows.usage"] == [({"db.system.name": system}, 10)]
    assert exported["mcp_tasks.store.rows.limit"] == [({"db.system.name": system}, 50)]


@pytest.mark.parametrize("kind", [Counted, StatsOnly])
async def test_the_store_is_read_only_when_collected_and_at_most_once_an_interval(
    kind: type[StatsOnly],
) -> None:
    """No collection, no reading of the store (``counts()``, or ``stats()`` where it has
    none); collections within one interval share one reading."""
    store = kind()
    metered = Metered()
    async with metered.gauges.watching(store, 0.01) as reading:  # type: ignore[arg-type]
        await anyio.sleep(0.3)
        assert store.calls == 0
        metered.collect()
        await read_once(reading)
        assert store.calls == 1
    store.calls = 0
    async with metered.gauges.watching(store, 3600) as reading:  # type: ignore[arg-type]
        metered.collect()
        await read_once(reading)
        for _ in range(20):
            metered.collect()
            await anyio.sleep(0.1)
        assert store.calls == 1
    assert metered.collect() == {}  # the block is over: its store is no longer exported


async def test_a_failed_or_hung_reading_is_a_gap_not_a_stale_figure() -> None:
    """After a failure, or a reading past the store's timeout, nothing is exported
    until a reading succeeds again."""
    store = Counted(StoreOptions(timeout_ms=100))
    metered = Metered()
    async with metered.gauges.watching(store, 0.01) as reading:  # type: ignore[arg-type]
        assert reading is not None
        await reading.refresh()
        assert metered.collect()["mcp_tasks.store.rows.usage"] == EMPTY
        store.failing = True
        await reading.refresh()
        assert "mcp_tasks.store.rows.usage" not in metered.collect()
        store.failing, store.hanging = False, True
        await reading.refresh()  # bounded by timeout_ms: returns
        assert "mcp_tasks.store.rows.usage" not in metered.collect()
        store.hanging = False
        await reading.refresh()
        assert metered.collect()["mcp_tasks.store.rows.usage"] == EMPTY


async def test_a_store_without_stats_exports_no_gauge() -> None:
    """A Store that offers neither ``counts()`` nor ``stats()`` is not watched."""

    class NoStats:
        url = "custom://"

    metered = Metered()
    async with metered.gauges.watching(NoStats(), 0.01) as reading:  # type: ignore[arg-type]
        assert reading is None
        await anyio.sleep(0.05)
        assert metered.collect() == {}


async def test_without_an_sdk_a_tasks_with_gauges_never_reads_stats() -> None:
    """``TelemetryOptions(store_gauges_s=…)`` with no meter provider installed: nothing collects, so
    the store is never counted (this test process installs none)."""
    store = Counted()
    tasks = Tasks(
        store=store,
        runner=RunnerOptions(recovery_interval_s=None),
        telemetry=TelemetryOptions(store_gauges_s=10),
    )  # type: ignore[arg-type]
    async with tasks.running():
        await anyio.sleep(1.5)
    assert store.calls == 0


def test_an_interval_below_the_minimum_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Below 10 s is a clear error: from the options, and from the CLI as a one-line usage
    error."""
    with pytest.raises(InvalidArgument, match="at least 10 seconds"):
        TelemetryOptions(store_gauges_s=5)
    assert main(["worker", "--store", "memory://", "--store-gauges", "5"]) == 2
    err = capsys.readouterr().err
    assert "--store-gauges: the store gauges' interval must be at least 10 seconds" in err
    assert "Traceback" not in err

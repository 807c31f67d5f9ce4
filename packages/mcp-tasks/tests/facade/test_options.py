"""The option groups ``Tasks`` takes: each checks its values when built, and reaches the part
that uses it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    InvalidArgument,
    RunnerOptions,
    ServingOptions,
    Tasks,
    TelemetryOptions,
)

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: RunnerOptions(lease_ms=0), "lease_ms must be a positive integer"),
        (
            lambda: RunnerOptions(lease_ms=1_000, heartbeat_ms=1_000),
            "heartbeat_ms must be a positive integer below lease_ms",
        ),
        (lambda: RunnerOptions(recovery_interval_s=0), "recovery_interval_s must be positive"),
        (lambda: RunnerOptions(max_adopted=0), "max_adopted must be a positive integer"),
        (lambda: ServingOptions(default_ttl_ms=0), "default_ttl_ms must be a positive integer"),
        (
            lambda: ServingOptions(default_poll_interval_ms=0),
            "default_poll_interval_ms must be a positive integer",
        ),
        (lambda: ServingOptions(max_listen_streams=0), "max_listen_streams must be a positive"),
        (
            lambda: ServingOptions(max_listen_streams_per_owner=0),
            "max_listen_streams_per_owner must be a positive integer",
        ),
        (lambda: TelemetryOptions(store_gauges_s=5), "at least 10 seconds"),
    ],
)
def test_an_option_out_of_range_is_refused_when_the_options_are_built(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        build()


def test_the_heartbeat_defaults_to_a_third_of_the_lease_at_most_ten_seconds() -> None:
    assert RunnerOptions(lease_ms=3_000).renew_every_ms == 1_000
    assert RunnerOptions().renew_every_ms == 10_000
    assert RunnerOptions(lease_ms=3_000, heartbeat_ms=200).renew_every_ms == 200


def test_each_group_reaches_the_part_that_uses_it() -> None:
    """The runner runs by its options, the engine serves by its own, the Tasks exports by
    its telemetry; left out, each group is its defaults."""
    runner = RunnerOptions(worker_id="w-1", lease_ms=5_000, run_tasks=False)
    serving = ServingOptions(default_ttl_ms=None, max_listen_streams=3)
    telemetry = TelemetryOptions(store_gauges_s=60)
    tasks = Tasks(runner=runner, serving=serving, telemetry=telemetry)
    assert tasks.runner.options is runner
    assert tasks.runner.worker_id == "w-1"
    assert tasks.engine.options is serving
    assert tasks.engine.listen_slots.total == 3
    assert tasks.telemetry is telemetry
    plain = Tasks()
    assert plain.runner.options == RunnerOptions()
    assert plain.engine.options == ServingOptions()
    assert plain.telemetry == TelemetryOptions()


def test_a_worker_runs_tasks_and_looks_for_work_whatever_the_app_chose() -> None:
    """``mcp-tasks worker`` runs the bodies of an app built not to run them, and recovers
    work even when the app turned its recovery loop off; other options stay the app's."""
    chosen = RunnerOptions(run_tasks=False, recovery_interval_s=None, lease_ms=5_000)
    worker = chosen.for_worker()
    assert worker.run_tasks
    assert worker.recovery_interval_s == 1.0
    assert worker.lease_ms == 5_000
    assert RunnerOptions(recovery_interval_s=0.2).for_worker().recovery_interval_s == 0.2

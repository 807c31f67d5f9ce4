"""A takeover and a due retry under OpenTelemetry's SDK (its in-memory metric reader).

Run as a script (a meter provider is set once per process): a task of ``orphaned`` left
claimed by a dead process (its lease runs out) and a task of ``flaky``, created for workers,
that asks for one retry and then completes, both run by one recovering ``Tasks``. Prints one
JSON object: the points of ``mcp_tasks.tasks.recovered`` and ``mcp_tasks.tasks.retries``
(attributes and value), and the runner's INFO lines.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from mcp_tasks import (
    ANY_OWNER,
    MemoryBackend,
    MemoryTaskStore,
    NewTask,
    RunnerOptions,
    Tasks,
    current_task_context,
    new_task_id,
)
from mcp_tasks.runtime.runner import tool_work

READER = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def run() -> None:
    backend = MemoryBackend()
    seed = MemoryTaskStore(backend=backend)
    orphaned, flaky = new_task_id(), new_task_id()
    await seed.create(
        NewTask(
            task_id=orphaned,
            work=tool_work("orphaned", {}, task_id=orphaned),
            claimed_by="dead-process",
            lease_ms=100,
        )
    )
    await seed.create(
        NewTask(task_id=flaky, work=tool_work("flaky", {}, task_id=flaky, retry_delays_ms=(50,)))
    )
    tasks = Tasks(
        store=MemoryTaskStore(backend=backend),
        runner=RunnerOptions(lease_ms=2_000, recovery_interval_s=0.05),
    )

    async def body(arguments: Any) -> str:
        context = current_task_context()
        assert context is not None
        if context.attempt == 0 and context.task_id == flaky:
            context.retry("busy")
        return "done"

    tasks.register("orphaned", mode="required", run=body)
    tasks.register("flaky", mode="required", run=body, retry_delays_ms=[50])
    async with tasks.running():
        for task_id in (orphaned, flaky):
            for _ in range(750):
                if (await seed.get(task_id, ANY_OWNER)).status.is_terminal:
                    break
                await anyio.sleep(0.02)
            else:
                raise AssertionError("a task did not finish in 15 s")


def points(name: str) -> list[list[Any]]:
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    return [
                        [dict(point.attributes or {}), point.value]  # type: ignore[union-attr]
                        for point in metric.data.data_points
                    ]
    return []


def main() -> None:
    lines = Lines()
    runner_log = logging.getLogger("mcp_tasks.runtime.runner")
    runner_log.setLevel(logging.INFO)
    runner_log.addHandler(lines)
    anyio.run(run)
    report = {
        "recovered": points("mcp_tasks.tasks.recovered"),
        "retries": points("mcp_tasks.tasks.retries"),
        "lines": lines.lines,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()

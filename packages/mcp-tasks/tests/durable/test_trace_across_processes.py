"""A task's trace survives its process: the task is created on process A (``serve`` of
``traced_app``, which sets OpenTelemetry up itself and writes every span to a file as it ends),
A is killed with SIGKILL mid-run, and a worker B (``mcp-tasks worker`` with OpenTelemetry set up
from the standard ``OTEL_*`` variables: console spans, a Prometheus scrape endpoint) finishes
it. B's run span is a trace of its own, linked to the span on A that created the task; B's
scrape endpoint counts the takeover and the completion."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.testing import free_socket

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Processes

pytestmark = pytest.mark.anyio

LEASE_MS = "1000"


def spans_in(text: str) -> list[dict[str, Any]]:
    """Every span object in ``text``: JSON objects one after another, of any layout (one a
    line, or the console exporter's indented ones)."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while True:
        start = text.find("{", at)
        if start < 0:
            return found
        span, at = decoder.raw_decode(text, start)
        found.append(span)


def sample(scraped: str, metric: str, label: str) -> float:
    """The value of the one sample of ``metric`` with ``label`` in a Prometheus scrape."""
    (value,) = [
        float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith(metric + "{") and label in line
    ]
    return value


async def wait_for_lines(processes: Processes, kind: str, pid: int, timeout_s: float) -> None:
    with anyio.fail_after(timeout_s):
        # Written by another process: there is nothing to wait on but the file.
        while not any(p == pid for p, _, _ in processes.lines(kind)):  # noqa: ASYNC110
            await anyio.sleep(0.02)


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
async def test_a_run_on_another_process_links_to_the_trace_that_created_the_task(
    processes: Processes, tmp_path: Path
) -> None:
    """SIGKILL A mid-run; B takes the task over. B's ``mcp_tasks.run`` span starts a trace of
    its own whose one link is A's ``mcp_tasks.create`` span, and B's Prometheus endpoint
    counts one recovered and one completed task of the tool."""
    with free_socket() as sock:
        metrics_port = sock.getsockname()[1]
    a_spans, b_output = tmp_path / "a.jsonl", tmp_path / "b.out"
    first = await processes.serve(
        "traced_app:mcp", TRACED_SPANS=str(a_spans), CRASH_LEASE_MS=LEASE_MS
    )
    second = await processes.worker(
        stdout=b_output,
        CRASH_LEASE_MS=LEASE_MS,
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="prometheus",
        OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
        OTEL_EXPORTER_PROMETHEUS_PORT=str(metrics_port),
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    assert first.url is not None
    async with tasks_client(first.url) as client:
        handle = await start_tool(client, "slow", {"seconds": 1.0})
    assert isinstance(handle, TaskHandle)
    await wait_for_lines(processes, "run", first.pid, timeout_s=60)
    first.kill()
    await first.wait()
    await wait_for_lines(processes, "commit", second.pid, timeout_s=60)

    created = [s for s in spans_in(a_spans.read_text()) if s["name"] == "mcp_tasks.create"]
    assert len(created) == 1
    origin = created[0]["context"]
    runs: list[dict[str, Any]] = []
    with anyio.fail_after(30):  # B writes its batch of spans within its schedule delay
        while not runs:
            runs = [s for s in spans_in(b_output.read_text()) if s["name"] == "mcp_tasks.run"]
            await anyio.sleep(0.05)
    (run,) = runs
    assert run["parent_id"] is None
    assert run["context"]["trace_id"] != origin["trace_id"]
    assert [link["context"] for link in run["links"]] == [
        {
            "trace_id": origin["trace_id"],
            "span_id": origin["span_id"],
            "trace_state": "[]",
        }
    ]
    assert run["attributes"]["gen_ai.tool.name"] == "slow"
    assert run["attributes"]["mcp_tasks.outcome"] == "completed"

    async with httpx.AsyncClient(timeout=10) as http:
        scraped = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    assert sample(scraped, "mcp_tasks_tasks_recovered_total", 'gen_ai_tool_name="slow"') == 1
    assert sample(scraped, "mcp_tasks_tasks_completed_total", 'gen_ai_tool_name="slow"') == 1

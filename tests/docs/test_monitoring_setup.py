"""The local set-up of docs/monitoring.md works as written: its first shell block (spans on
the console, metrics on a Prometheus endpoint, the demo tools on SQLite with the store
gauges) run on ports of the test's own, a task of ``build`` called, and the block's scrape
finds the task's counters and the store's gauges."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2 as httpx
import pytest
from markdown_blocks import REPO, blocks
from transcripts import free_port

from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from collections.abc import Iterator

PAGE = REPO / "docs" / "monitoring.md"


def local_setup() -> tuple[dict[str, str], list[str], str]:
    """The block's serve command (its variables, its argv) and its scrape's ``grep`` word."""
    (block,) = [b for b in blocks(PAGE, "bash") if "OTEL_EXPORTER_PROMETHEUS_PORT" in b.text]
    serve, scrape = [c for c in block.text.replace("\\\n", " ").split("\n") if c.strip()]
    words = shlex.split(serve)
    variables = dict(word.split("=", 1) for word in words if re.match(r"^[A-Z_]+=", word))
    argv = [word for word in words if not re.match(r"^[A-Z_]+=", word)]
    assert argv[:2] == ["uv", "run"], argv
    grep = shlex.split(scrape.split("#")[0])
    endpoint = f"localhost:{variables['OTEL_EXPORTER_PROMETHEUS_PORT']}/metrics"
    assert grep[:3] == ["curl", "-s", endpoint], grep
    return variables, argv[2:], grep[-1]


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[str, int, str]]:
    """The block's server, run from a temporary folder: its MCP URL, metrics port, grep word."""
    variables, argv, word = local_setup()
    metrics_port, port = free_port(), free_port()
    variables["OTEL_EXPORTER_PROMETHEUS_PORT"] = str(metrics_port)
    command = [str(Path(sys.executable).parent / argv[0]), *argv[1:], "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command,
            cwd=tmp_path,
            env={**os.environ, **variables},
            stdout=subprocess.DEVNULL,  # the console exporter's spans
            stderr=stderr,
        )
    try:
        for _ in range(600):
            if "serving on" in log.read_text():
                break
            if process.poll() is not None:
                raise AssertionError(f"serve exited {process.returncode}: {log.read_text()}")
            time.sleep(0.1)
        else:
            raise AssertionError("serve did not start in 60 s")
        yield f"http://127.0.0.1:{port}/mcp", metrics_port, word
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_local_setup_exports_a_tasks_counters_and_the_store_gauges(
    serving: tuple[str, int, str],
) -> None:
    """After one ``build`` task, the scrape has its creation and completion by tool, and,
    once the background reading ran, the store's tasks by status."""
    url, metrics_port, word = serving

    async def run_build() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            client = RawClient(http, url)
            called = await client.call("tools/call", {"name": "build", "arguments": {}})
            task_id = called["result"]["taskId"]
            for _ in range(300):
                got = await client.call("tasks/get", {"taskId": task_id})
                if got["result"]["status"] == "completed":
                    return
                await anyio.sleep(0.05)
            raise AssertionError("build did not complete")

    anyio.run(run_build)
    scraped: list[str] = []
    for _ in range(100):  # the first scrape asks for the gauges; a later one has them
        text = httpx.get(f"http://localhost:{metrics_port}/metrics", timeout=5).text
        scraped = [line for line in text.splitlines() if word in line]
        if any(line.startswith("mcp_tasks_store_tasks{") for line in scraped):
            break
        time.sleep(0.1)
    assert any(
        line.startswith("mcp_tasks_tasks_created_total{") and 'gen_ai_tool_name="build"' in line
        for line in scraped
    ), scraped
    assert any(
        line.startswith("mcp_tasks_tasks_completed_total{") and 'gen_ai_tool_name="build"' in line
        for line in scraped
    ), scraped
    completed = [
        line
        for line in scraped
        if line.startswith("mcp_tasks_store_tasks{") and 'mcp_tasks_task_status="completed"' in line
    ]
    assert len(completed) == 1, scraped
    assert completed[0].endswith(" 1.0"), completed

"""The hooks-removed copy that ``bench/otel_overhead.py`` serves beside this checkout: built
from this commit's source, it keeps no telemetry call and still runs a task end to end; a
hook the rewrite does not know, or one that moved, stops the bench instead of being measured
as removed. The overhead itself is measured by ``nox -s bench``, never asserted here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from bench import otel_overhead

if TYPE_CHECKING:
    from pathlib import Path

#: A task called over HTTP on the copy, polled until completed; prints where mcp_tasks is.
LIFECYCLE = """
import anyio, httpx2 as httpx
from mcp.server.mcpserver import MCPServer
import mcp_tasks
from mcp_tasks import Tasks
from mcp_tasks.testing import RawClient, running_asgi

async def main():
    tasks = Tasks()
    mcp = MCPServer("s", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def double(x: int) -> str:
        return str(2 * x)

    async with running_asgi(tasks.http_app(mcp)) as url, httpx.AsyncClient() as http:
        client = RawClient(http, url)
        called = await client.call("tools/call", {"name": "double", "arguments": {"x": 21}})
        task_id = called["result"]["taskId"]
        for _ in range(500):
            got = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if got["status"] == "completed":
                print(mcp_tasks.__file__)
                return
            await anyio.sleep(0.02)
        raise SystemExit("not completed")

anyio.run(main)
"""


@pytest.mark.slow
def test_the_stripped_copy_keeps_no_hook_and_still_runs_a_task(tmp_path: Path) -> None:
    """Every hook goes (the rewrite's own check finds no telemetry name left), every module
    still compiles, and a task created over HTTP on the copy completes."""
    folder, removed = otel_overhead.strip_hooks(tmp_path)
    assert removed > 0
    for path in (folder / "mcp_tasks").rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    done = subprocess.run(
        [sys.executable, "-c", LIFECYCLE],
        env={**os.environ, "PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().startswith(str(folder))


def test_a_hook_the_rewrite_does_not_know_stops_the_bench(tmp_path: Path) -> None:
    """A telemetry call of a shape no rule strips is named, not left in the copy."""
    source = tmp_path / "source"
    shutil.copytree(otel_overhead.SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
    engine = source / "engine" / "core.py"
    engine.write_text(engine.read_text() + "\n\nHOOKED = tool_attributes\n")
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError, match=r"hooks left in the stripped copy: engine/core\.py:"):
        otel_overhead.strip_hooks(tmp_path / "out", source)


def test_a_hook_that_moved_stops_the_bench(tmp_path: Path) -> None:
    """A hook of the bespoke list that is not where the list says is named."""
    source = tmp_path / "source"
    shutil.copytree(otel_overhead.SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
    context = source / "runtime" / "context.py"
    text = context.read_text()
    context.write_text(text.replace("self._measured = {}", "self._measured = dict()"))
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError, match=r"a hook of runtime/context\.py is not where it was"):
        otel_overhead.strip_hooks(tmp_path / "out", source)


@pytest.mark.slow
def test_a_reformatted_source_loses_no_hook(tmp_path: Path) -> None:
    """The same source laid out anew (ruff format at 60 columns: other line breaks, calls
    split over lines): the rewrite finds and removes as many hooks as in the source as it
    is, and the copy keeps none."""
    source = tmp_path / "source"
    shutil.copytree(otel_overhead.SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
    layout = ("-m", "ruff", "format", "--isolated", "--line-length", "60", str(source))
    subprocess.run([sys.executable, *layout], check=True, capture_output=True, timeout=120)
    assert (source / "engine" / "core.py").read_text() != (
        otel_overhead.SOURCE / "engine" / "core.py"
    ).read_text()
    (tmp_path / "as_is").mkdir()
    (tmp_path / "reformatted").mkdir()
    _, as_is = otel_overhead.strip_hooks(tmp_path / "as_is")
    _, reformatted = otel_overhead.strip_hooks(tmp_path / "reformatted", source)
    assert reformatted == as_is

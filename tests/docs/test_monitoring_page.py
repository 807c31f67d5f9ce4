"""docs/monitoring.md, run: the local set-up serves with spans on the console and metrics
on a Prometheus endpoint, and the page's `curl | grep` finds the task counter there.

The block's ports are free ports here (the server's 8000 and Prometheus' 9464 may be
taken on a shared machine); everything else runs as the page writes it, `uv run` being a
clone's way of running this virtualenv's `mcp-tasks`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import TYPE_CHECKING

from markdown_blocks import REPO, PageBlocks
from test_get_started import free_port
from transcripts import background, environment, run

if TYPE_CHECKING:
    from pathlib import Path

PAGE = PageBlocks("docs/monitoring.md")
PAGE.explain(
    'pip install "mcp-tasks[otel]"',
    "installs from the package index, where mcp-tasks is not published yet; the extra's "
    "packages are in the workspace (dev group), and tests/packaging checks every extra "
    "named anywhere exists",
)
LOCAL = PAGE.take("OTEL_TRACES_EXPORTER=console")
PAGE.explain(
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318",
    "exports to an OTLP collector, which this machine does not run; OTLP export from "
    "serve and worker is packages/mcp-tasks/tests/cli/test_cli_otel.py's",
)
AGAINST_REVISION = PAGE.explain(
    "bench.against_revision",
    "serves two revisions side by side for rounds of wrk: minutes of a quiet machine, a "
    "measurement, not a check; its options are checked here with --help",
)
SERVING = "Application startup complete"


def shell_lines(block_text: str) -> list[str]:
    """The block's commands: continuation lines joined, blank lines between commands."""
    return [line.strip() for line in block_text.replace("\\\n", " ").split("\n\n") if line]


def test_the_local_setup_exports_spans_and_serves_the_task_counter(tmp_path: Path) -> None:
    """The page's serve, with its OTEL_* variables, answers a `build` call; the page's
    curl pipeline then finds the created-tasks counter labelled with the tool's name, and
    the console shows the service's spans."""
    serve_line, curl_line = shell_lines(LOCAL.text)
    words = shlex.split(serve_line)
    variables = dict(word.split("=", 1) for word in words if re.match(r"^[A-Z_]+=", word))
    command = " ".join(words[len(variables) :]).removeprefix("uv run ")
    assert variables["OTEL_EXPORTER_PROMETHEUS_PORT"] == "9464"
    metrics_port, port = free_port(), free_port()
    variables["OTEL_EXPORTER_PROMETHEUS_PORT"] = str(metrics_port)
    env = environment(**variables)
    with background(command, tmp_path, SERVING, port=port, env=env) as server:
        code, output = run(f"mcp-tasks call http://127.0.0.1:{port}/mcp build", tmp_path)
        assert code == 0, output
        pipeline = curl_line.split("  #", 1)[0].replace(":9464/", f":{metrics_port}/")
        scraped = subprocess.run(
            ["bash", "-c", pipeline], capture_output=True, text=True, timeout=60, check=False
        )
        assert server.stop() == 0
    counter = re.compile(r'^mcp_tasks_tasks_created_total\{.*gen_ai_tool_name="build".*\} 1\.0$')
    assert any(counter.match(line) for line in scraped.stdout.splitlines()), scraped.stdout
    assert '"service.name": "builder"' in server.text, server.text[-3000:]


def test_the_against_revision_command_takes_the_pages_arguments(tmp_path: Path) -> None:
    """`python -m bench.against_revision --help` (from the repository root, as the page
    runs it) lists a revision argument and --rounds."""
    (line,) = shell_lines(AGAINST_REVISION.text)
    assert line == "uv run python -m bench.against_revision main --rounds 10"
    code, output = run("python -m bench.against_revision --help", REPO)
    assert code == 0, output
    assert "--rounds" in output

"""docs/monitoring.md: every block run or explained. The local set-up (spans on the
console, metrics on a Prometheus endpoint) is test_monitoring_setup.py's."""

from __future__ import annotations

from markdown_blocks import REPO, PageBlocks
from transcripts import run

PAGE = PageBlocks("docs/monitoring.md")
PAGE.explain(
    'pip install "mcp-tasks[otel]"',
    "installs from the package index, where mcp-tasks is not published yet; the extra's "
    "packages are in the workspace (dev group), and tests/packaging checks every extra "
    "named anywhere exists",
)
PAGE.explain(
    "OTEL_TRACES_EXPORTER=console",
    "the local set-up: test_monitoring_setup.py runs its two commands as written and finds "
    "a task's counters and the store gauges in the scrape",
)
PAGE.explain(
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318",
    "exports to an OTLP collector, which this machine does not run; OTLP export from "
    "serve and worker is packages/mcp-tasks/tests/cli/test_cli_otel.py's",
)
OTEL_OVERHEAD = PAGE.explain(
    "bench.otel_overhead",
    "serves this checkout beside a copy stripped of its hooks for rounds of wrk: minutes of "
    "a quiet machine, a measurement, not a check (bench/tests/test_otel_overhead.py tests "
    "the stripping); its options are checked here with --help",
)
SERVING = "Application startup complete"


def shell_lines(block_text: str) -> list[str]:
    """The block's commands: continuation lines joined, blank lines between commands."""
    return [line.strip() for line in block_text.replace("\\\n", " ").split("\n\n") if line]


def test_the_overhead_command_takes_the_pages_arguments() -> None:
    """`python -m bench.otel_overhead --help` (from the repository root, as the page runs
    it) lists --quick."""
    (line,) = shell_lines(OTEL_OVERHEAD.text)
    command = line.split("#", 1)[0].strip()
    assert command == "uv run --group bench python -m bench.otel_overhead --quick"
    code, output = run("python -m bench.otel_overhead --help", REPO)
    assert code == 0, output
    assert "--quick" in output

"""Get started, followed as a reader would: its files, then its commands, as the page writes them.

hello.py and client.py are written from the page's blocks; each command the test runs must
be a line of one of the page's ``bash`` blocks, and runs as it is there, on a free port
instead of 8000 (other servers may hold 8000). Installing from a clone is the packaging
session's check (tests/packaging): this test runs in the workspace's virtualenv.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import TYPE_CHECKING

import pytest
from conftest import GET_STARTED, write_tour
from markdown_blocks import blocks
from transcripts import (
    Background,
    Transcript,
    as_on_the_page,
    background,
    differences,
    free_port,
    normalized,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

PAGE_URL = "http://127.0.0.1:8000/mcp"
#: Generous: the machine is shared; a step that takes longer than this has hung.
STEP_S = 120


def output_after(command: str) -> Transcript:
    """The page's ``text`` block that shows what ``command`` (the line of the ``bash`` block
    just before it) prints, as a transcript of that command."""
    page = blocks(GET_STARTED)
    for before, block in pairwise(page):
        if (
            before.language == "bash"
            and before.text.strip() == command
            and block.language == "text"
        ):
            return Transcript(block, command, block.text.splitlines())
    raise LookupError(f"no output block after {command!r}")


def page_commands() -> set[str]:
    return {
        line.strip() for block in blocks(GET_STARTED, "bash") for line in block.text.splitlines()
    }


def on_the_page(command: str) -> str:
    assert command in page_commands(), f"not a command of Get started: {command}"
    return command


def page_command(command: str, folder: Path, port: int) -> Background:
    """A command of the page, started in the background on ``port``."""
    return Background(on_the_page(command), folder, port=port, timeout_s=STEP_S)


def started(
    command: str, folder: Path, port: int, ready: str
) -> AbstractContextManager[Background]:
    """A command of the page, once its output holds ``ready``; killed at the end."""
    return background(on_the_page(command), folder, ready, port=port, timeout_s=STEP_S)


@pytest.fixture
def tour(tmp_path: Path) -> Path:
    write_tour(tmp_path)
    return tmp_path


def test_the_first_task_runs_from_the_command_line_and_from_python(tour: Path) -> None:
    """The memory-store server of the page answers its `call` with `counted to 3` and its
    client.py prints the states the page shows, then the result."""
    port = free_port()
    (tour / "client.py").write_text(
        (tour / "client.py").read_text().replace(PAGE_URL, f"http://127.0.0.1:{port}/mcp")
    )
    serve = "mcp-tasks serve hello:mcp --store memory://"
    with started(serve, tour, port, "Application startup complete") as server:
        command = "mcp-tasks call http://127.0.0.1:8000/mcp count to=3"
        call = page_command(command, tour, port)
        assert call.finish() == 0, call.text
        problem = differences(output_after(command), call.text, port=port)
        assert problem is None, problem

        client = page_command("python client.py", tour, port)
        assert client.finish() == 0, client.text
        states = re.compile(r"^(working|input_required|completed) ")  # watch()'s changes
        problem = differences(output_after("python client.py"), client.text, status=states)
        assert problem is None, problem
        assert server.stop() == 0


def test_a_worker_finishes_the_task_of_a_stopped_server_on_sqlite(tour: Path) -> None:
    """On SQLite, the task of a server stopped halfway is taken over by the page's waiting
    worker, and the page's `call` follows it through the restarted server to `counted to 20`."""
    port = free_port()
    serve = "mcp-tasks serve hello:mcp --store sqlite:///tasks.db"
    worker_command = "mcp-tasks worker hello:mcp --store sqlite:///tasks.db"
    with (
        started(serve, tour, port, "Application startup complete") as server,
        started(worker_command, tour, port, "mcp-tasks: worker ") as worker,
    ):
        call = page_command("mcp-tasks call http://127.0.0.1:8000/mcp count to=20", tour, port)
        try:
            call.wait_for("Counting (1/20)")
            assert server.stop() == 0
            worker.wait_for("resuming a task of tool 'count'")
            (lost,) = [b.text for b in blocks(GET_STARTED, "text") if "reconnecting" in b.text]
            call.wait_for("reconnecting for up to 60 s")
            live = normalized(as_on_the_page(call.text, port=port))
            assert normalized(lost.rstrip("\n"))[0] in live, call.text
            with started(serve, tour, port, "Application startup complete") as restarted:
                assert call.finish() == 0, call.text
                assert "mcp-tasks call: reconnected" in call.text
                assert call.text.rstrip().endswith("counted to 20")
                assert restarted.stop() == 0
            assert worker.stop() == 0
        finally:
            call.kill()
    assert (tour / "tasks.db").exists()


def test_the_demo_checks_the_install(tmp_path: Path) -> None:
    """The page's `mcp-tasks demo` (the README's too) ends with exit 0: every step of the
    tour ended as expected."""
    demo = page_command("mcp-tasks demo", tmp_path, free_port())
    assert demo.finish() == 0, demo.text

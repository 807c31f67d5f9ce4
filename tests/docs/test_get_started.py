"""Get started, followed as a reader would: its files, then its commands, as the page writes them.

hello.py and client.py are written from the page's blocks; each command the test runs must
be a line of one of the page's ``bash`` blocks, and runs as it is there, on a free port
instead of 8000 (other servers may hold 8000). Installing from a clone is the packaging
session's check (tests/packaging): this test runs in the workspace's virtualenv.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import GET_STARTED, write_tour
from markdown_blocks import blocks
from transcripts import Transcript, as_on_the_page, differences, normalized

if TYPE_CHECKING:
    from collections.abc import Iterator

BIN = Path(sys.executable).parent
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """A command of the page running in the background; its stderr and stdout collected."""

    def __init__(self, command: str, folder: Path, port: int) -> None:
        assert command in page_commands(), f"not a command of Get started: {command}"
        argv = command.replace(PAGE_URL, f"http://127.0.0.1:{port}/mcp").split()
        if argv[:2] == ["mcp-tasks", "serve"]:
            argv += ["--port", str(port)]
        argv[0] = str(BIN / argv[0]) if argv[0] == "mcp-tasks" else sys.executable
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        env.pop("MCP_TASKS_STORE_URL", None)
        self.output: list[str] = []
        self.process = subprocess.Popen(
            argv,
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    @property
    def text(self) -> str:
        return "".join(self.output)

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + STEP_S
        while text not in self.text:
            assert self.process.poll() is None or text in self.text, f"exited:\n{self.text}"
            assert time.monotonic() < deadline, f"no {text!r} within {STEP_S} s:\n{self.text}"
            time.sleep(0.05)

    def finish(self) -> int:
        """Wait for the command to end: its exit code."""
        code = self.process.wait(STEP_S)
        self._reader.join(STEP_S)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish()

    def stop(self) -> int:
        """Ctrl-C, as the reader stops it."""
        self.process.send_signal(signal.SIGINT)
        return self.finish()


@contextmanager
def started(command: str, folder: Path, port: int, ready: str) -> Iterator[Process]:
    process = Process(command, folder, port)
    try:
        process.wait_for(ready)
        yield process
    finally:
        process.kill()


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
        call = Process(command, tour, port)
        assert call.finish() == 0, call.text
        problem = differences(output_after(command), call.text, port=port)
        assert problem is None, problem

        client = Process("python client.py", tour, port)
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
        call = Process("mcp-tasks call http://127.0.0.1:8000/mcp count to=20", tour, port)
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
    demo = Process("mcp-tasks demo", tmp_path, free_port())
    assert demo.finish() == 0, demo.text

"""The guides' programs, run as a reader runs them: each file written from the page's block
titled with its name, each command a line of the page's ``bash`` blocks (the part before
its comment), run in that folder with this virtualenv's Python and ``mcp-tasks``."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from markdown_blocks import REPO, blocks
from transcripts import BIN, environment, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

GUIDES = REPO / "docs" / "guides"
PAGE_URL = "http://127.0.0.1:8000/mcp"
#: Generous: the machine may be shared; a step that takes longer than this has hung.
STEP_S = 120


def write_files(page: Path, folder: Path, ports: Mapping[int, int] | None = None) -> list[str]:
    """Every block of ``page`` titled as a file, written into ``folder`` (with the URLs on
    the page's ports pointed at ``ports``): their names."""
    names = []
    for block in blocks(page):
        if block.title:
            text = block.text
            for page_port, port in (ports or {}).items():
                text = text.replace(f"127.0.0.1:{page_port}/", f"127.0.0.1:{port}/")
            (folder / block.title).write_text(text, encoding="utf-8")
            names.append(block.title)
    return names


def page_commands(page: Path) -> dict[str, str]:
    """Each command of the page's bash blocks → the comment after it ("" if none)."""
    commands = {}
    for block in blocks(page, "bash"):
        for line in block.text.splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                commands[command.strip()] = comment.strip()
    return commands


def split(command: str) -> tuple[dict[str, str], list[str]]:
    """A command's leading ``NAME=value`` settings, and its argv with this virtualenv's
    Python and ``mcp-tasks``."""
    words = command.split()
    settings = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        settings[name] = value
    if words[0] == "python":
        return settings, [sys.executable, *words[1:]]
    if words[0] == "mcp-tasks":
        return settings, [str(BIN / "mcp-tasks"), *words[1:]]
    raise AssertionError(f"not a command this test runs: {command}")


def on_ports(command: str, ports: Mapping[int, int]) -> tuple[dict[str, str], list[str]]:
    """The command, talking to or serving on free ports instead of the page's (8000, …):
    ``ports`` maps each port of the page to the one the test uses."""
    for page_port, port in ports.items():
        command = command.replace(f"127.0.0.1:{page_port}/", f"127.0.0.1:{port}/")
        command = command.replace(f"--port {page_port}", f"--port {port}")
    settings, words = split(command)
    if words[1] == "serve" and "--port" not in words:
        words += ["--port", str(ports[8000])]
    return settings, words


@contextmanager
def serving(
    page: Path, command: str, folder: Path, port: int, ports: Mapping[int, int] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A page's ``mcp-tasks serve`` running in the background until ``port`` accepts
    (``ports``: the page's ports to the test's, by default 8000 to ``port``)."""
    assert command in page_commands(page), f"not a command of {page.name}: {command}"
    settings, words = on_ports(command, ports or {8000: port})
    process = subprocess.Popen(
        words,
        cwd=folder,
        env=environment(**settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + STEP_S
        while True:
            assert process.poll() is None, f"{command} exited:\n{process.communicate()[1]}"
            assert time.monotonic() < deadline, f"{command} did not listen within {STEP_S} s"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.communicate(timeout=STEP_S)


def run(page: Path, command: str, folder: Path, ports: Mapping[int, int] | None = None) -> str:
    """Run one command of ``page`` to its end in ``folder``: its stdout (it must exit 0)."""
    assert command in page_commands(page), f"not a command of {page.name}: {command}"
    settings, words = on_ports(command, ports or {})
    done = subprocess.run(
        words,
        cwd=folder,
        env=environment(**settings),
        capture_output=True,
        text=True,
        timeout=STEP_S,
        check=False,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def test_stdio_a_task_outlives_the_launch_that_started_it(tmp_path: Path) -> None:
    """start.py's launch ends mid-task; finish.py's launch of the same server on the same
    SQLite file runs it again and reads its result by the kept id, as the page shows."""
    page = GUIDES / "stdio.md"
    assert write_files(page, tmp_path) == ["server.py", "start.py", "finish.py"]
    commands = page_commands(page)

    started = run(page, "python start.py", tmp_path)
    assert started.strip() == commands["python start.py"]
    assert (tmp_path / "task-id").stat().st_mode & 0o077 == 0  # only its owner reads it
    finished = run(page, "python finish.py", tmp_path)
    assert finished.strip() == commands["python finish.py"]


def test_lowlevel_server_a_checksum_task_runs_through_the_pages_commands(tmp_path: Path) -> None:
    """server.py, served by the page's `mcp-tasks serve` on SQLite, answers the page's
    `mcp-tasks call` with the SHA-256 of its text, run as a task."""
    page = GUIDES / "lowlevel-server.md"
    assert write_files(page, tmp_path) == ["server.py"]
    port = free_port()
    with serving(page, "mcp-tasks serve server:server --store sqlite:///tasks.db", tmp_path, port):
        out = run(
            page,
            "mcp-tasks call http://127.0.0.1:8000/mcp checksum text=hello",
            tmp_path,
            {8000: port},
        )
    assert out.strip().splitlines()[-1] == hashlib.sha256(b"hello").hexdigest()


@contextmanager
def background(page: Path, command: str, folder: Path) -> Iterator[subprocess.Popen[str]]:
    """A page's long-running command (a worker) in the background, stopped at the end."""
    assert command in page_commands(page), f"not a command of {page.name}: {command}"
    settings, words = split(command)
    process = subprocess.Popen(
        words, cwd=folder, env=environment(**settings), stdout=subprocess.DEVNULL, text=True
    )
    try:
        yield process
        assert process.poll() is None, f"{command} exited early"
    finally:
        process.terminate()
        process.wait(timeout=STEP_S)


def test_manual_mode_a_worker_drives_the_task_through_the_folder_queue(tmp_path: Path) -> None:
    """The page's server queues the render job; worker.py, another process, takes it and
    drives the task through its frames to the result the page names; the job is gone."""
    page = GUIDES / "manual-mode.md"
    assert write_files(page, tmp_path) == ["server.py", "worker.py"]
    port = free_port()
    call = "mcp-tasks call http://127.0.0.1:8000/mcp render scene=intro"
    with (
        serving(page, "mcp-tasks serve server:mcp", tmp_path, port),
        background(page, "python worker.py", tmp_path),
    ):
        out = run(page, call, tmp_path, {8000: port})
    assert out.strip().splitlines()[-1] == "rendered intro in 3 frames"
    assert not list((tmp_path / "jobs").iterdir())  # taken, done and removed
    assert (tmp_path / "jobs").stat().st_mode & 0o077 == 0  # private to its owner


def test_many_processes_front_ends_that_run_nothing_and_a_worker_that_runs_all(
    tmp_path: Path,
) -> None:
    """A task created through one front end (which runs no body) is run by the worker (the
    result names its process) and read through the other front end, all on one SQLite file."""
    page = GUIDES / "many-processes.md"
    assert write_files(page, tmp_path) == ["app.py", "client.py"]
    commands = page_commands(page)
    ports = {8000: free_port(), 8001: free_port()}
    first, second, worker, client = commands
    with (
        serving(page, first, tmp_path, ports[8000], ports),
        serving(page, second, tmp_path, ports[8001], ports),
        background(page, worker, tmp_path) as working,
    ):
        out = run(page, client, tmp_path, ports)
    assert out.strip() == f"report for 2026-11, run by process {working.pid}"


def test_migrating_the_after_server_answers_fastmcp_tasks_own_client(tmp_path: Path) -> None:
    """The page's "after" server, on our FastMCP extension and SQLite, creates a task for
    fastmcp-tasks' unchanged client and answers its polls with the report."""
    page = GUIDES / "migrating-from-fastmcp-tasks.md"
    port = free_port()
    assert write_files(page, tmp_path, {8000: port}) == ["server.py", "client.py"]
    with serving(page, "mcp-tasks serve server:mcp --store sqlite:///tasks.db", tmp_path, port):
        out = run(page, "python client.py", tmp_path, {8000: port})
    assert out.splitlines() == ["working", "report for 2026-11"]

"""Command transcripts in the docs, checked against a fresh run of the command.

A transcript is a ``text`` block whose first line is ``$ COMMAND``; the lines after it are
what the command prints (stdout and stderr, as a terminal shows them). The page's scenario
module sets up what the command needs (a server, a store holding some tasks), runs the
command as the block writes it, and checks ``differences``. Only what cannot be the same
from run to run is normalised, on both sides, and only as follows:

* the task id a run prints reads ``ID`` (the page writes ``ID`` for it);
* ``127.0.0.1:8000``, the page's port, is a free port in the run (other servers may hold
  8000; ``mcp-tasks serve`` is given ``--port``), written back as 8000;
* the test's own temporary folder reads as the page's folder (``/srv``) and a unique store
  namespace as the page's (``replacements`` the scenario passes);
* durations and clock readings (``8s old``, ``0 ms ahead``, ``after 0:02``) and a
  server's version number (``Redis 7.0.15``) stand for any value;
* lines ``task: …`` (a followed task's status, one per change the polls saw) depend on
  when the polls land: each state the run prints must be one the page shows, in the
  page's order, and the last the same; a repeat counts once, and a state the polls
  missed under load may be absent (``status`` names such lines in other output).

When a check fails, its message is the fresh output, ready to paste into the page.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from markdown_blocks import Block

BIN = Path(sys.executable).parent
PAGE_HOST = "127.0.0.1:8000"
#: Values that change between runs: each match, on either side, reads as its placeholder.
VARYING = [
    (re.compile(r"\b\d+(\.\d+)?(ms|s|m|h) old\b"), "<age> old"),
    (re.compile(r"\b-?\d+ ms (ahead of|behind)\b"), "<offset> ms"),
    (re.compile(r"\bafter \d+:\d\d\b"), "after <elapsed>"),
    (re.compile(r"\bRedis \d+\.\d+\.\d+\b"), "Redis <version>"),
]
TASK_ID_LINE = re.compile(r"^task id: (\S+) ")
STATUS_LINE = re.compile(r"^task: ")
#: Generous: the machine is shared; a command that takes longer than this has hung.
COMMAND_S = 180


@dataclass(frozen=True)
class Transcript:
    """A transcript block: its command (after ``$ ``) and the lines the page shows."""

    block: Block
    command: str
    lines: list[str]

    @classmethod
    def of(cls, block: Block) -> Transcript:
        first, *rest = block.text.splitlines()
        assert first.startswith("$ "), f"{block}: a transcript starts with '$ COMMAND'"
        return cls(block, first[2:], rest)


def environment(**extra: str) -> dict[str, str]:
    """This process's environment for a command of the docs: unbuffered, wide, no store URL
    of the caller's."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **extra}
    env.pop("MCP_TASKS_STORE_URL", None)
    return env


def free_port() -> int:
    """A port nothing on this machine listens on, for a command the page runs on 8000."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def argv(command: str, port: int | None = None, bin_dir: Path = BIN) -> list[str]:
    """A page's command line as an argv (shell quoting honoured), on ``port`` instead of
    8000, with ``mcp-tasks`` and ``python`` taken from ``bin_dir``."""
    if port is not None:
        command = command.replace(PAGE_HOST, f"127.0.0.1:{port}")
    words = shlex.split(command)
    if port is not None and words[:2] == ["mcp-tasks", "serve"]:
        words += ["--port", str(port)]
    if words[0] in ("mcp-tasks", "python"):
        words[0] = str(bin_dir / words[0])
    return words


def run(
    command: str,
    folder: Path,
    *,
    port: int | None = None,
    bin_dir: Path = BIN,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """Run a page's command to its end in ``folder``: its exit code and its output."""
    completed = subprocess.run(
        argv(command, port, bin_dir),
        cwd=folder,
        env=dict(env) if env is not None else environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_S,
        check=False,
    )
    return completed.returncode, completed.stdout


def as_on_the_page(
    output: str, *, port: int | None = None, replacements: Mapping[str, str] | None = None
) -> str:
    """A run's output with its task ids, port and ``replacements`` (live → page) written
    as the page writes them."""
    ids = {match[1] for line in output.splitlines() if (match := TASK_ID_LINE.match(line))}
    for task_id in ids:
        output = output.replace(task_id, "ID")
    if port is not None:
        output = output.replace(f"127.0.0.1:{port}", PAGE_HOST)
    for live, page in (replacements or {}).items():
        output = output.replace(live, page)
    return output.rstrip("\n")


def normalized(text: str) -> list[str]:
    """``text``'s lines with each varying value as its placeholder."""
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    return text.splitlines()


def differences(
    transcript: Transcript,
    output: str,
    *,
    port: int | None = None,
    replacements: Mapping[str, str] | None = None,
    status: re.Pattern[str] = STATUS_LINE,
) -> str | None:
    """``None`` when the run printed what the page shows; else a message with the fresh
    output, as the page would show it. ``status``: which lines are a followed task's
    states (by default ``task: …``)."""
    fresh = as_on_the_page(output, port=port, replacements=replacements)
    if matches(normalized("\n".join(transcript.lines)), normalized(fresh), status):
        return None
    return f"{transcript.block}: the command prints, today:\n$ {transcript.command}\n{fresh}"


def matches(page: list[str], live: list[str], status: re.Pattern[str] = STATUS_LINE) -> bool:
    """The same lines, but for status lines (``status``): each state the run printed is one
    the page shows, in the page's order (a repeat counts once; a state the polls missed may
    be absent), and the last is the same."""

    def split(lines: list[str]) -> tuple[list[str], list[str]]:
        states = [line for line in lines if status.match(line)]
        once = [line for i, line in enumerate(states) if i == 0 or states[i - 1] != line]
        return [line for line in lines if not status.match(line)], once

    page_other, page_states = split(page)
    live_other, live_states = split(live)
    remaining = iter(page_states)
    return (
        page_other == live_other
        and page_states[-1:] == live_states[-1:]
        and all(any(state == candidate for candidate in remaining) for state in live_states)
    )


class Background:
    """A page's command running in the background in ``folder``; its output collected.
    ``timeout_s``: how long any wait on it may take before it counts as hung."""

    def __init__(
        self,
        command: str,
        folder: Path,
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = COMMAND_S,
    ) -> None:
        self.timeout_s = timeout_s
        self.output: list[str] = []
        self.process = subprocess.Popen(
            argv(command, port),
            cwd=folder,
            env=dict(env) if env is not None else environment(),
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
        """Until the output holds ``text``; fails if the command ends or hangs first."""
        deadline = time.monotonic() + self.timeout_s
        while text not in self.text:
            assert self.process.poll() is None or text in self.text, f"exited:\n{self.text}"
            assert time.monotonic() < deadline, f"no {text!r} in {self.timeout_s} s:\n{self.text}"
            time.sleep(0.05)

    def finish(self) -> int:
        """Wait for the command to end: its exit code."""
        code = self.process.wait(self.timeout_s)
        self._reader.join(self.timeout_s)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code

    def stop(self) -> int:
        """Ctrl-C, as the reader stops it: the exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.finish()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish()


@contextmanager
def background(
    command: str,
    folder: Path,
    ready: str,
    *,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = COMMAND_S,
) -> Iterator[Background]:
    """The command, once its output holds ``ready``; killed at the end if still running."""
    process = Background(command, folder, port=port, env=env, timeout_s=timeout_s)
    try:
        process.wait_for(ready)
        yield process
    finally:
        process.kill()

"""The deployment page's files hold: every mcp-tasks command line in its systemd units,
Dockerfile and compose file is one `mcp-tasks`' own parser accepts, the units stop with
SIGTERM and a grace period, the proxy passes the listen stream unbuffered and idle, and its
health probe tells a ready server from none."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from markdown_blocks import REPO, titled
from transcripts import BIN, environment, free_port

from mcp_tasks.cli import build_parser, chosen_command

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

PAGE = REPO / "docs" / "deployment.md"
UNITS = ("mcp-tasks.service", "mcp-tasks-worker@.service")
STEP_S = 120


def parsed(words: list[str]) -> argparse.Namespace:
    """``mcp-tasks WORDS…`` as the CLI parses it; a usage error fails the test."""
    assert Path(words[0]).name == "mcp-tasks", f"not an mcp-tasks command line: {words}"
    arguments = words[1:]
    try:
        return build_parser(chosen_command(arguments)).parse_args(arguments)
    except SystemExit as refused:  # argparse's way to refuse
        raise AssertionError(f"mcp-tasks refuses {words}: exit {refused.code}") from None


def unit_settings(name: str) -> list[tuple[str, str]]:
    text = titled(PAGE, name).text
    return re.findall(r"^(\w+)=(.*)$", text, re.M)


@pytest.mark.parametrize("name", UNITS)
def test_the_systemd_units_run_commands_the_cli_accepts(name: str) -> None:
    """Each ExecStart/ExecStartPre is an mcp-tasks command line the parser accepts, with no
    --store on it (the URL and its password come from the environment file)."""
    commands = [shlex.split(v) for k, v in unit_settings(name) if k.startswith("ExecStart")]
    assert commands
    for words in commands:
        args = parsed(words)
        assert args.command in {"serve", "worker", "migrate"}
        assert args.store is None
    settings = dict(unit_settings(name))
    assert settings["KillSignal"] == "SIGTERM"
    assert int(settings["TimeoutStopSec"]) >= 30  # the lease's release needs a moment
    assert settings["EnvironmentFile"]


def test_the_server_unit_migrates_before_it_serves() -> None:
    """The server unit's ExecStartPre is `migrate`, and its ExecStart `serve`."""
    settings = dict(unit_settings("mcp-tasks.service"))
    assert parsed(shlex.split(settings["ExecStartPre"])).command == "migrate"
    assert parsed(shlex.split(settings["ExecStart"])).command == "serve"


def test_the_container_runs_commands_the_cli_accepts() -> None:
    """The Dockerfile's CMD serves on every interface of the container, and each compose
    service's command is one the parser accepts; the migrate service runs first."""
    dockerfile = titled(PAGE, "Dockerfile").text
    [cmd] = re.findall(r"^CMD (\[.*\])$", dockerfile, re.M)
    serve = parsed(json.loads(cmd))
    assert (serve.command, serve.host, serve.port) == ("serve", "0.0.0.0", 8000)

    compose = yaml.safe_load(titled(PAGE, "compose.yaml").text)
    services = compose["services"]
    commands = {
        name: parsed(service["command"]).command
        for name, service in services.items()
        if "command" in service
    }
    assert commands == {"migrate": "migrate", "worker": "worker"}
    for name in ("server", "worker"):
        after = services[name]["depends_on"]["migrate"]["condition"]
        assert after == "service_completed_successfully"
        assert services[name]["environment"]["MCP_TASKS_STORE_URL"].startswith("postgresql://")


def test_the_proxy_passes_the_listen_stream_unbuffered_and_idle() -> None:
    """nginx: HTTP/1.1 upstream, no buffering or caching, and read/send timeouts of an hour."""
    conf = titled(PAGE, "nginx.conf").text
    directives = dict(re.findall(r"^\s*(proxy_\w+) (.+);$", conf, re.M))
    assert directives["proxy_http_version"] == "1.1"
    assert directives["proxy_buffering"] == "off"
    assert directives["proxy_cache"] == "off"
    assert directives["proxy_read_timeout"] == directives["proxy_send_timeout"] == "1h"


def probe(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "healthcheck.py").write_text(titled(PAGE, "healthcheck.py").text)
    return subprocess.run(
        [sys.executable, "healthcheck.py", url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=STEP_S,
        check=False,
    )


@contextmanager
def running(argv: list[str], folder: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        argv,
        cwd=folder,
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=STEP_S)


def listening(port: int) -> None:
    deadline = time.monotonic() + STEP_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.1)


@contextmanager
def running_after(port: int, argv: list[str], folder: Path) -> Iterator[subprocess.Popen[str]]:
    """``argv`` started once something listens on ``port`` (serve refuses a store it
    cannot reach)."""
    listening(port)
    with running(argv, folder) as process:
        yield process


def test_the_health_probe_tells_ready_from_a_lost_store_and_from_no_server(tmp_path: Path) -> None:
    """healthcheck.py exits 0 against `mcp-tasks serve` on a Redis of the test's own (its
    tasks/get read the store and missed); 1 with "Task store unavailable" once that Redis
    is gone; 1 with the connection's refusal once the server is gone too."""
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        message = "no redis-server on PATH to start a store of this test's own"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    redis_port, port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    store = f"redis://127.0.0.1:{redis_port}/0?prefix=docs_health"
    redis_argv = [redis_server, "--port", str(redis_port), "--save", "", "--appendonly", "no"]
    serve = [str(BIN / "mcp-tasks"), "serve", "--store", store, "--port", str(port)]
    with running(redis_argv, tmp_path) as redis, running_after(redis_port, serve, tmp_path):
        listening(port)
        ready = probe(tmp_path, url)
        assert ready.returncode == 0, ready.stderr
        redis.kill()
        redis.wait(timeout=STEP_S)
        lost = probe(tmp_path, url)  # the store is gone: the read gives up at its bound (5 s)
        assert lost.returncode == 1
        assert lost.stderr.strip() == "not ready: Task store unavailable"
    gone = probe(tmp_path, url)
    assert gone.returncode == 1
    assert gone.stderr.startswith("not ready: ")
    assert "refused" in gone.stderr

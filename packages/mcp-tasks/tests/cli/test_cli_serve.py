"""`mcp-tasks serve` as a real subprocess, driven by the tasks client over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.cli import main
from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.testing import free_socket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


#: Generous: importing the SDK (and FastMCP) on a loaded machine can take many seconds;
#: the bound is only there so that a server that never comes up fails instead of hanging.
UP_WITHIN_S = 120.0


@asynccontextmanager
async def serve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """Run `mcp-tasks serve … --port P` until the block ends; yields the /mcp URL once it
    answers."""
    url, process = start_serving(*args, cwd=cwd, env=env)
    try:
        await wait_until_up(url, process)
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=30)


def start_serving(
    *args: str, cwd: Path, env: dict[str, str] | None = None, host: str = "127.0.0.1"
) -> tuple[str, subprocess.Popen[str]]:
    """Start `mcp-tasks serve … --port P`; its /mcp URL (on ``host``) and its process."""
    with free_socket() as sock:  # ask the OS for a free port, then hand it to the server
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", *args, "--port", str(port)]
    process = subprocess.Popen(
        command, cwd=cwd, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True
    )
    return f"http://{host}:{port}/mcp", process


async def wait_until_up(url: str, process: subprocess.Popen[str]) -> None:
    """Until ``url`` answers; fails at once, with its stderr, if the server exits first."""
    with anyio.fail_after(UP_WITHIN_S):
        while True:
            if process.poll() is not None:
                _, stderr = process.communicate()
                pytest.fail(f"serve exited with {process.returncode} before answering: {stderr}")
            try:
                async with httpx.AsyncClient() as raw:
                    await raw.get(url)
                return
            except httpx.TransportError:
                await anyio.sleep(0.1)


async def test_serve_without_app_serves_the_demo_tools(tmp_path: Path) -> None:
    """With no APP, serve offers the demo tools with tasks enabled, on the given store."""
    async with serve("--store", "memory://", cwd=tmp_path) as url, tasks_client(url) as client:
        handle = await start_tool(client, "build", {"ref": "served"})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"
    assert not any(tmp_path.iterdir()), "a memory store writes no file"  # noqa: ASYNC240


@pytest.mark.parametrize("bound", ["127.0.0.2", "0.0.0.0"])
async def test_serve_answers_the_address_it_is_bound_to_beyond_localhost(
    tmp_path: Path, bound: str
) -> None:
    """serve --host with an address that is not localhost's name answers requests whose Host
    header is that address (the SDK's localhost-only Host check is for loopback binds)."""
    url, process = start_serving(
        "official_sdk_server:mcp", "--store", "memory://", "--host", bound,
        cwd=EXAMPLES, host="127.0.0.2",
    )  # fmt: skip
    try:
        await wait_until_up(url, process)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "build", {"ref": "reached by address"})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert state.status == "completed"


async def test_serve_an_app_by_module_path(tmp_path: Path) -> None:
    """serve APP imports module:attr (from the current directory) and serves it."""
    async with (
        serve("official_sdk_server:mcp", "--store", "memory://", cwd=EXAMPLES) as url,
        tasks_client(url) as client,
    ):
        handle = await start_tool(client, "build", {"ref": "app"})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"


FASTMCP_APP = """
from fastmcp import FastMCP

mcp = FastMCP("bare")


@mcp.tool(task=True)
async def triple(n: int) -> int:
    return n * 3
"""

BARE_MCPSERVER = """
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("no-tasks")
"""


async def test_serve_gives_a_bare_fastmcp_app_our_extension(tmp_path: Path) -> None:
    """A FastMCP app with task=True tools and no tasks extension is served with ours."""
    await anyio.Path(tmp_path / "bare_fastmcp.py").write_text(FASTMCP_APP)
    async with (
        serve("bare_fastmcp:mcp", "--store", "memory://", cwd=tmp_path) as url,
        tasks_client(url) as client,
    ):
        handle = await start_tool(client, "triple", {"n": 5})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"
    assert state.result is not None
    assert "15" in str(state.result["content"])


def test_serve_refuses_an_sdk_app_without_tasks(tmp_path: Path) -> None:
    """An MCPServer that does not enable tasks is refused with the way to enable them."""
    (tmp_path / "bare_sdk.py").write_text(BARE_MCPSERVER)
    run = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", "bare_sdk:mcp", "--store", "memory://"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode != 0
    assert "does not enable mcp-tasks" in run.stderr


PINNED_APP = """
from mcp.server.mcpserver import MCPServer
from mcp_tasks import Tasks

tasks = Tasks(store="sqlite:///pinned.db")
mcp = MCPServer("pinned", extensions=[tasks.extension()], lifespan=tasks.lifespan)


@tasks.tool(mcp, mode="optional")
async def echo(text: str) -> str:
    return text
"""

UNPINNED_APP = PINNED_APP.replace('Tasks(store="sqlite:///pinned.db")', "Tasks()")


def refused(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", *args, "--port", "1"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_a_store_other_than_the_one_the_app_pins(tmp_path: Path) -> None:
    """An app that pins its store is not silently served from another: serve exits 2 with
    one line naming the pinned store, and creates nothing."""
    (tmp_path / "pinned_app.py").write_text(PINNED_APP)
    run = refused("pinned_app:mcp", "--store", "sqlite:///other.db", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith("mcp-tasks serve: pinned_app:mcp pins its task store to ")
    assert f"sqlite:///{tmp_path.resolve()}/pinned.db" in run.stderr
    assert not (tmp_path / "other.db").exists()
    assert not (tmp_path / "pinned.db").exists()


def _banner_and_status(*args: str, cwd: Path, tool: str) -> tuple[str, str]:
    """Serve, run `tool` once as a task, stop; the banner line and the task's final status."""

    async def call(url: str) -> str:
        await wait_until_up(url, process)
        async with tasks_client(url) as client:
            handle = await start_tool(client, tool, {"text": "hi"})
            assert isinstance(handle, TaskHandle)
            return (await handle.wait()).status

    url, process = start_serving(*args, cwd=cwd)
    try:
        status = anyio.run(call, url)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    banner = next(line for line in stderr.splitlines() if line.startswith("mcp-tasks: serving"))
    return banner, status


def test_serve_hands_its_store_to_an_app_that_pins_none(tmp_path: Path) -> None:
    """`Tasks()` takes the --store store: the task lands in that file, the banner names it."""
    (tmp_path / "unpinned_app.py").write_text(UNPINNED_APP)
    banner, status = _banner_and_status(
        "unpinned_app:mcp", "--store", "sqlite:///handed.db", cwd=tmp_path, tool="echo"
    )
    assert status == "completed"
    assert banner.endswith(f"(store: sqlite:///{tmp_path.resolve()}/handed.db)")
    assert (tmp_path / "handed.db").exists()


def test_serve_without_store_names_the_store_the_app_pins(tmp_path: Path) -> None:
    """No --store: a pinned app is served from its own store, and the banner says which."""
    (tmp_path / "pinned_app.py").write_text(PINNED_APP)
    banner, status = _banner_and_status("pinned_app:mcp", cwd=tmp_path, tool="echo")
    assert status == "completed"
    assert banner.endswith(f"(store: sqlite:///{tmp_path.resolve()}/pinned.db)")
    assert (tmp_path / "pinned.db").exists()
    assert not (tmp_path / "mcp-tasks.db").exists()  # serve's own default was not opened


def test_serve_serves_the_http_app_the_readme_builds(tmp_path: Path) -> None:
    """`app = tasks.http_app(mcp)` (a TasksFastPath) is served as it is, on the --store
    store handed to its Tasks."""
    (tmp_path / "http_app.py").write_text(UNPINNED_APP + "\napp = tasks.http_app(mcp)\n")
    banner, status = _banner_and_status(
        "http_app:app", "--store", "sqlite:///handed.db", cwd=tmp_path, tool="echo"
    )
    assert status == "completed"
    assert banner.endswith(f"(store: sqlite:///{tmp_path.resolve()}/handed.db)")
    assert (tmp_path / "handed.db").exists()


def test_serve_accepts_the_pinned_store_named_again(tmp_path: Path) -> None:
    """--store naming the very store the app pins is no conflict."""
    (tmp_path / "pinned_app.py").write_text(PINNED_APP)
    banner, status = _banner_and_status(
        "pinned_app:mcp", "--store", "sqlite:///pinned.db", cwd=tmp_path, tool="echo"
    )
    assert status == "completed"
    assert banner.endswith(f"(store: sqlite:///{tmp_path.resolve()}/pinned.db)")


def test_serve_refuses_an_object_that_is_no_server_beside_a_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """APP naming the module's Tasks (not the server it serves) is one line naming what to
    pass instead, exit 2, before any store is opened."""
    (tmp_path / "tasks_not_server.py").write_text(PINNED_APP)
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "tasks_not_server:tasks", "--port", "1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "mcp-tasks serve: tasks_not_server:tasks is a Tasks, not an MCP server; "
        "pass the server (an MCPServer, Server or FastMCP, or tasks.http_app(server))"
    ]
    assert not (tmp_path / "pinned.db").exists()


BAD_TASK_CONFIG_APP = """
from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig

mcp = FastMCP("bad")


@mcp.tool(task=TaskConfig(mode="optional", poll_interval=0.5))
async def echo(text: str) -> str:
    return text
"""


def test_serve_refuses_a_fastmcp_task_option_of_the_wrong_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`TaskConfig(poll_interval=0.5)` (seconds, not a timedelta) is one line naming the
    tool and the field, exit 2, before anything listens: not a traceback from uvicorn."""
    (tmp_path / "bad_task_config.py").write_text(BAD_TASK_CONFIG_APP)
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "bad_task_config:mcp", "--store", "memory://", "--port", "1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "mcp-tasks serve: bad_task_config:mcp: Tool 'echo': TaskConfig.poll_interval must "
        "be a datetime.timedelta (e.g. timedelta(seconds=0.5)), got float 0.5"
    ]


# --- start-up: an app that would fail every task call; the log an operator reads ---

NO_LIFESPAN_MCPSERVER = """
from mcp.server.mcpserver import MCPServer
from mcp_tasks import Tasks

tasks = Tasks()
mcp = MCPServer("no-lifespan", extensions=[tasks.extension()])


@tasks.tool(mcp, mode="optional")
async def echo(text: str) -> str:
    return text
"""

NO_LIFESPAN_LOWLEVEL = """
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_tasks import Tasks

tasks = Tasks()


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="hi")])


server = Server("no-lifespan", on_call_tool=call_tool)
tasks.install(server)
tasks.register("echo", mode="optional")
"""

HINT = (
    "pass lifespan=tasks.lifespan to the server (MCPServer(..., lifespan=tasks.lifespan) or "
    "Server(..., lifespan=tasks.lifespan)), or enter `async with tasks.running():` in a "
    "lifespan of your own"
)


def _serve_once(app: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_tasks.cli",
            "serve",
            app,
            "--store",
            "memory://",
            "--port",
            "0",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_serve_refuses_an_mcpserver_built_without_the_tasks_lifespan(tmp_path: Path) -> None:
    """An MCPServer whose lifespan does not run the Tasks runner is refused at start-up:
    exit 2, one line saying so and one line of the fix; it is never announced as served."""
    (tmp_path / "no_lifespan.py").write_text(NO_LIFESPAN_MCPSERVER)
    run = _serve_once("no_lifespan:mcp", tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-2:] == [
        "mcp-tasks serve: no_lifespan:mcp does not run its tasks: its server started without "
        "entering the Tasks runner, so every task call would fail",
        HINT,
    ]
    assert "serving on" not in run.stderr
    assert "startup failed" not in run.stderr  # uvicorn's own line: serve says why instead
    assert "Traceback" not in run.stderr


def test_serve_refuses_a_lowlevel_server_built_without_the_tasks_lifespan(
    tmp_path: Path,
) -> None:
    """The same for a low-level Server that installs Tasks but not its lifespan."""
    (tmp_path / "no_lifespan_lowlevel.py").write_text(NO_LIFESPAN_LOWLEVEL)
    run = _serve_once("no_lifespan_lowlevel:server", tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1] == HINT
    assert "serving on" not in run.stderr


FASTMCP_OWN_EXTENSION = """
from fastmcp import FastMCP
from mcp_tasks import Tasks

tasks = Tasks()
mcp = FastMCP("fast")
mcp.add_extension(tasks.fastmcp_extension())


@mcp.tool(task=True)
async def echo(text: str) -> str:
    return text
"""


def _serve_and_call(*args: str, cwd: Path) -> tuple[str, str]:
    """Serve, run `echo` once as a task, stop: the task's status and serve's stderr."""

    async def call(url: str) -> str:
        await wait_until_up(url, process)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "echo", {"text": "hi"})
            assert isinstance(handle, TaskHandle)
            return (await handle.wait()).status

    url, process = start_serving(*args, cwd=cwd)
    try:
        status = anyio.run(call, url)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    return status, stderr


def test_serve_logs_a_fastmcp_apps_start_up_and_no_polls(tmp_path: Path) -> None:
    """A FastMCP app with our extension (whose runner FastMCP's lifespan starts) is served;
    serve's log names the store at INFO, as for an SDK app, and carries no access-log line
    per request (every poll would be one)."""
    (tmp_path / "fast_app.py").write_text(FASTMCP_OWN_EXTENSION)
    status, stderr = _serve_and_call("fast_app:mcp", "--store", "memory://", cwd=tmp_path)
    assert status == "completed"
    assert "INFO:     mcp-tasks: tasks are stored in memory://" in stderr.splitlines()
    assert "POST /mcp" not in stderr


def test_serve_access_log_is_an_option(tmp_path: Path) -> None:
    """`--access-log` logs every request, one line each."""
    (tmp_path / "fast_app.py").write_text(FASTMCP_OWN_EXTENSION)
    status, stderr = _serve_and_call(
        "fast_app:mcp", "--store", "memory://", "--access-log", cwd=tmp_path
    )
    assert status == "completed"
    assert '"POST /mcp HTTP/1.1" 200' in stderr


def test_serve_log_level_warning_drops_the_info_lines(tmp_path: Path) -> None:
    """`--log-level warning`: the INFO lines (the store at start-up, uvicorn's) are not
    printed; the banner, which is no log line, still is."""
    (tmp_path / "fast_app.py").write_text(FASTMCP_OWN_EXTENSION)
    status, stderr = _serve_and_call(
        "fast_app:mcp", "--store", "sqlite:///tasks.db", "--log-level", "warning", cwd=tmp_path
    )
    assert status == "completed"
    assert "INFO" not in stderr
    assert "mcp-tasks: serving on" in stderr


def test_serve_log_lines_are_not_wrapped_when_stderr_is_a_file(tmp_path: Path) -> None:
    """Written to a file, a log line is one line however long (Rich wrapped at 80 columns,
    splitting the store's path)."""
    deep = tmp_path / ("a-folder-with-a-long-name-" * 4)
    deep.mkdir()
    (deep / "fast_app.py").write_text(FASTMCP_OWN_EXTENSION)
    status, stderr = _serve_and_call("fast_app:mcp", "--store", "sqlite:///tasks.db", cwd=deep)
    assert status == "completed"
    assert f"INFO:     mcp-tasks: tasks are stored in sqlite:///{deep.resolve()}/tasks.db" in (
        stderr.splitlines()
    )

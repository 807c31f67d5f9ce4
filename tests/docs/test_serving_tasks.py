"""docs/serving-tasks.md, run: its first block is the app the rest of the page builds on.

Each fragment runs as part of a program made of the page's own blocks, in the page's words,
plus the least glue that names what the fragment leaves to the reader (a tool body, a job
queue): that glue is here, never in the page. Each program serves its app over real HTTP
and calls it with the tasks client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from markdown_blocks import PageBlocks, program, run_program

if TYPE_CHECKING:
    from pathlib import Path

PAGE = PageBlocks("docs/serving-tasks.md")
APP = PAGE.take('mcp = MCPServer("builder"')
TESTING = PAGE.take("async def confirm(context, params)")
HTTP_APP = PAGE.take("app = tasks.http_app(mcp)  # instead of")
USE_STORE = PAGE.take("tasks.use_store(")
MOUNTED = PAGE.take('Mount("/api"')
NOTIFIER = PAGE.take("class Counting")
RETRIES = PAGE.take("retry_delays_ms=exponential_backoff")
PAGE.take("subscriptions/listen")  # test_wire_examples sends it to a live server

#: Calls the page's `build` tool of the app served at URL_EXPRESSION, answering its
#: question, and checks its result: the glue after a block that builds an app.
CALL_BUILD = """
import anyio
import mcp_types as types

from mcp_tasks.client import TaskHandle
from mcp_tasks.testing import running, running_asgi, start_tool, tasks_client


async def yes(context, params):
    return types.ElicitResult(action="accept", content={{}})


async def call_build():
    async with {serve} as url, tasks_client({url}, elicitation_callback=yes) as client:
        handle = await start_tool(client, "build", {{"ref": "main"}})
        assert isinstance(handle, TaskHandle)
        final = await handle.wait()
        assert final.call_tool_result().content[0].text == "built main", final


anyio.run(call_build)
"""


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_the_first_app_passes_the_pages_own_test() -> None:
    """The page's app, then its "Testing a server" block: the build task completes."""
    run_program(program(APP, TESTING), "serving_app")


def test_the_http_app_serves_the_app() -> None:
    """`tasks.http_app(mcp)` serves the first app (its lifespan included) at /mcp."""
    glue = CALL_BUILD.format(serve="running_asgi(app)", url="url")
    run_program(program(APP, HTTP_APP, glue), "serving_http_app")


def test_the_app_mounted_in_starlette_with_its_own_lifespan_serves_under_api() -> None:
    """The Starlette app of the page, its lifespan running the tasks and the session
    manager, serves the first app at /api/mcp."""
    mounted = 'url.replace("/mcp", "/api/mcp")'  # running_asgi yields the app's /mcp URL
    glue = CALL_BUILD.format(serve="running_asgi(app)", url=mounted)
    run_program(program(APP, MOUNTED, glue), "serving_mounted")


def test_use_store_sets_the_store_and_a_pinned_app_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The block runs, and prints what its comment says."""
    run_program(program(USE_STORE), "serving_use_store")
    assert capsys.readouterr().out == "The app pins its task store to memory://other\n"


def test_the_counting_notifier_counts_the_changes_it_publishes() -> None:
    """The page's notifier wrapper, on its SQLite store, under the first app's tool: each
    change of a build task is published through it."""
    glue = """
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("builder", extensions=[tasks.extension()], lifespan=tasks.lifespan)


@tasks.tool(mcp, mode="optional", poll_interval_ms=500)
async def build(ref: str, ctx: TaskContext) -> str:
    await ctx.progress(1, 3, "Fetching")
    return f"built {ref}"
"""
    check = "\nassert tasks.notifier.inner.published >= 2, tasks.notifier.inner.published\n"
    call = CALL_BUILD.format(serve="running(mcp)", url="url")
    source = program(NOTIFIER, "from mcp_tasks import TaskContext", glue, call, check)
    run_program(source, "serving_notifier")


def test_a_retried_fetch_succeeds_once_its_upstream_answers() -> None:
    """The page's `fetch` on the first app's `tasks`: its upstream (the glue's `client`)
    answers 503 once, the body asks for a retry, and the retry's result completes the task."""
    upstream = """
import httpx2 as httpx


def upstream(request):
    calls.append(request.headers["Idempotency-Key"])
    return httpx.Response(503 if len(calls) == 1 else 200, text="fetched")


calls = []
client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
"""
    call = """
import anyio

from mcp_tasks.client import TaskHandle
from mcp_tasks.testing import running, start_tool, tasks_client


async def call_fetch():
    async with running(mcp) as url, tasks_client(url) as client_session:
        handle = await start_tool(client_session, "fetch", {"url": "http://upstream/x"})
        assert isinstance(handle, TaskHandle)
        final = await handle.wait()
        assert final.call_tool_result().content[0].text == "fetched", final


anyio.run(call_fetch)
assert len(calls) == 2 and calls[0] == calls[1], calls  # one key for both attempts
"""
    source = program(APP, upstream, RETRIES, call)
    run_program(source, "serving_retries")

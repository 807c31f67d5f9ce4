"""Task ids are bearer capabilities: a whole lifecycle over real HTTP, with every logger
captured at DEBUG, never puts an id in a log record or an error response."""

from __future__ import annotations

import base64
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_tasks import (
    ManualClock,
    MemoryBackend,
    MemoryTaskStore,
    RunnerOptions,
    ServingOptions,
    TaskContext,
    Tasks,
)
from mcp_tasks.adapters.fast_path import TasksFastPath, with_fast_path
from mcp_tasks.testing import RawClient, running_asgi, static_auth

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

pytestmark = pytest.mark.anyio

NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
TTL_MS = 60_000


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "leaks",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        **static_auth("alice", "bob"),
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        await ctx.progress(1, 2, "asking")
        answer = await ctx.elicit("name", "Name?")
        return str(answer.get("content"))

    @tasks.tool(mcp, mode="required")
    async def forever() -> str:
        await anyio.sleep_forever()
        return "unreachable"

    @tasks.tool(mcp, mode="required")
    async def refused() -> str:
        raise MCPError(code=-32000, message="the backend refused")

    @tasks.tool(mcp, mode="required")
    async def crashes() -> str:
        raise RuntimeError("a bug in the tool")

    @tasks.tool(mcp, mode="required")
    async def tool_error() -> str:
        raise ToolError("the tool says no")

    return mcp


class Recorder:
    """A RawClient that keeps every response, to check each error body afterwards."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.responses: list[httpx.Response] = []

    def as_principal(self, token: str) -> Recorder:
        other = Recorder(RawClient(self.client.http, self.client.url, token=token))
        other.responses = self.responses
        return other

    async def post(self, method: str, params: dict[str, Any], **kw: Any) -> httpx.Response:
        response = await self.client.post(method, params, **kw)
        self.responses.append(response)
        return response

    async def result(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        body = (await self.post(method, params, **kw)).json()
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    async def error(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        body = (await self.post(method, params, **kw)).json()
        assert "error" in body, body
        error: dict[str, Any] = body["error"]
        return error

    async def start(self, tool: str) -> str:
        created = await self.result("tools/call", {"name": tool})
        task_id: str = created["taskId"]
        return task_id

    async def wait(self, task_id: str, status: str) -> dict[str, Any]:
        with anyio.fail_after(10):
            while True:
                got = await self.result("tasks/get", {"taskId": task_id})
                if got["status"] == status:
                    return got
                await anyio.sleep(0.02)


FAST_PATHS: list[TasksFastPath] = []


@pytest.fixture(autouse=True, params=["sdk-path", "fast-path"])
def http_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test runs against the SDK's app, and as served with the tasks/* fast path; on
    the fast path, tasks/* requests must have been answered there, not only by the SDK."""
    FAST_PATHS.clear()
    if request.param == "fast-path":
        monkeypatch.setattr(f"{__name__}.served", behind_fast_path)
    yield
    assert all(fast.served > 0 for fast in FAST_PATHS)


def served(app: Any) -> Any:
    """The app the tests serve: the SDK's own (``http_path`` swaps in the fast path)."""
    return app


def behind_fast_path(app: Any) -> Any:
    # This server authenticates: the fast path goes in place of the SDK's endpoint, behind
    # the auth check, so it sees the principal the SDK's handler would.
    assert with_fast_path(app) is app
    endpoint = next(r.endpoint for r in app.routes if getattr(r, "path", None) == "/mcp")
    fast = endpoint.app
    assert isinstance(fast, TasksFastPath)
    assert fast.active
    FAST_PATHS.append(fast)
    return app


@asynccontextmanager
async def running(tasks: Tasks) -> AsyncIterator[Recorder]:
    app = served(build_server(tasks).streamable_http_app())
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield Recorder(RawClient(http, url, token="alice"))


async def test_a_whole_lifecycle_never_logs_or_echoes_a_task_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Create, progress, input (malformed, then right), cancel (twice), a failed body, a
    crashing body (a logged traceback), a tool error, another principal's get/update/cancel,
    routing-header mismatches, a hostile id variant, TTL expiry and the reaper: no log
    record (message or traceback, any level, DEBUG included) holds a full task id, none above
    DEBUG holds even its redacted 6-character prefix, and no error response holds either."""
    caplog.set_level(logging.DEBUG)
    clock = ManualClock()
    backend = MemoryBackend()
    tasks = Tasks(
        store=MemoryTaskStore(clock=clock, backend=backend),
        runner=RunnerOptions(reap_interval_s=0.02),
        serving=ServingOptions(default_ttl_ms=TTL_MS),
    )
    async with running(tasks) as alice:
        asked = await alice.start("ask")
        await alice.wait(asked, "input_required")
        assert (
            await alice.error("tasks/update", {"taskId": asked, "inputResponses": {"name": "x"}})
        )["code"] == -32602
        answer = {"action": "accept", "content": {"name": "Luca"}}
        await alice.result("tasks/update", {"taskId": asked, "inputResponses": {"name": answer}})
        await alice.wait(asked, "completed")

        stuck = await alice.start("forever")
        await alice.result("tasks/cancel", {"taskId": stuck})
        await alice.result("tasks/cancel", {"taskId": stuck})
        await alice.wait(stuck, "cancelled")

        refused = await alice.start("refused")
        crashed = await alice.start("crashes")
        erred = await alice.start("tool_error")
        assert (await alice.wait(refused, "failed"))["error"]["code"] == -32000
        # MCPServer turns an unexpected exception into an error result (and logs it).
        assert (await alice.wait(crashed, "completed"))["result"]["isError"] is True
        assert (await alice.wait(erred, "completed"))["result"]["isError"] is True

        pending = await alice.start("ask")
        await alice.wait(pending, "input_required")
        ids = [asked, stuck, refused, crashed, erred, pending]

        bob = alice.as_principal("bob")
        for task_id in ids:
            for method, extra in (
                ("tasks/get", {}),
                ("tasks/update", {"inputResponses": {"name": answer}}),
                ("tasks/cancel", {}),
            ):
                assert await bob.error(method, {"taskId": task_id, **extra}) == NOT_FOUND
        assert backend.tasks[pending].status.value == "input_required"

        for method in ("tasks/get", "tasks/cancel"):
            assert (await alice.error(method, {"taskId": pending}, name=stuck))["code"] == -32020
            assert (await alice.error(method, {"taskId": "other"}, name=pending))["code"] == -32020
        hostile = pending + "\x00"
        encoded = "=?base64?" + base64.b64encode(hostile.encode()).decode() + "?="
        assert await alice.error("tasks/get", {"taskId": hostile}, name=encoded) == NOT_FOUND

        # Every task was created at this clock's one instant; a lease or the end of a task
        # may have grown its ttlMs (S-TTL): step past the longest.
        ttls = [(await alice.result("tasks/get", {"taskId": task_id}))["ttlMs"] for task_id in ids]
        assert min(ttls) >= TTL_MS
        clock.advance(max(ttls) + 1)
        for task_id in ids:
            assert await alice.error("tasks/get", {"taskId": task_id}) == NOT_FOUND
        with anyio.fail_after(10):
            while backend.tasks:  # noqa: ASYNC110 (the reaper runs every 20 ms; no event to wait on)
                await anyio.sleep(0.02)

    for response in alice.responses:
        if "error" in response.json():
            for task_id in ids:
                assert task_id[:6] not in response.text
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    assert any(record.getMessage().startswith("reaped ") for record in caplog.records)
    assert any(record.exc_info for record in caplog.records)  # tracebacks were checked too
    for record in caplog.records:
        text = formatter.format(record)  # the message and any traceback
        for task_id in ids:
            assert task_id not in text, record.getMessage()
            if record.levelno > logging.DEBUG:
                assert task_id[:6] not in text, record.getMessage()

"""fastmcp-tasks' client (``fastmcp_tasks.call_tool_task``, ``ToolTask`` and the claim every
FastMCP ``Client`` folds in) drives our server over real HTTP, on every Store: an
``MCPServer`` with our SDK extension, and a FastMCP server whose task tools run on our
FastMCP extension instead of fastmcp-tasks' own (Docket) one.

Importing ``fastmcp_tasks`` is how its users turn on client task support: the package
registers its client extension on every ``fastmcp.Client`` of the process (the registry
is FastMCP's own, ``fastmcp.client.extension_hooks``). It changes nothing for the SDK's
``Client`` and nothing server-side, so it cannot leak into our other tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fastmcp_tasks import ToolTask, call_tool_task

from mcp_tasks import ANY_OWNER

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.anyio

#: A failure timeout only: ToolTask.result() and a claimed Client.call_tool poll without end.
GIVE_UP_S = 10


def text_of(result: Any) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.fixture(params=["MCPServer", "FastMCP"])
def serve(
    request: pytest.FixtureRequest, serve: Callable[..., Any], serve_fastmcp: Callable[..., Any]
) -> Callable[..., Any]:
    """Our server of either kind (conftest.py's ``serve``, ``serve_fastmcp``), on the
    test's Store."""
    return serve if request.param == "MCPServer" else serve_fastmcp


async def test_call_tool_task_polls_a_task_to_completion(serve: Callable[..., Any]) -> None:
    """call_tool_task answers a handle at once; its tasks/get sees the task working (the
    body is held), then ToolTask.result() polls it to completed with the tool's result.
    The task lives in our Store."""
    async with serve() as served, Client(served.url) as client:
        task = await call_tool_task(client, "double", {"n": 21})
        assert isinstance(task, ToolTask)
        assert task.create_result.status == "working"
        working = await task.status()
        assert working.status == "working"
        record = await served.tasks.store.get(task.task_id, ANY_OWNER)
        assert record.status.value == "working"
        served.probe.release.set()
        with anyio.fail_after(GIVE_UP_S):
            result = await task.result()
        done = await task.status()
    assert text_of(result) == "42"
    assert done.status == "completed"
    assert served.probe.task_ids == [task.task_id]


async def test_call_tool_runs_a_task_transparently(serve: Callable[..., Any]) -> None:
    """Plain Client.call_tool: the server answers a task (our body ran as one, and its
    record ends completed in our Store) and fastmcp-tasks' claim polls it to the result."""
    async with serve() as served, Client(served.url) as client:
        served.probe.release.set()
        with anyio.fail_after(GIVE_UP_S):
            result = await client.call_tool("double", {"n": 4})
        [task_id] = served.probe.task_ids
        record = await served.tasks.store.get(task_id, ANY_OWNER)
    assert text_of(result) == "8"
    assert record.status.value == "completed"


async def test_an_input_round_is_answered_through_tasks_update(
    serve: Callable[..., Any],
) -> None:
    """The body's ctx.elicit parks the task input_required with one elicitation request;
    fastmcp-tasks answers it with the client's elicitation handler through tasks/update,
    and the body resumes with that answer."""
    asked: list[str] = []

    async def handler(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        return {"note": "fragile"}

    async with serve() as served, Client(served.url, elicitation_handler=handler) as client:
        task = await call_tool_task(client, "confirm", {"item": "vase"})
        parked = await task.wait(state="input_required", timeout=GIVE_UP_S)
        assert parked.input_requests is not None
        assert list(parked.input_requests) == ["confirm"]
        assert parked.input_requests["confirm"]["method"] == "elicitation/create"
        assert asked == []
        with anyio.fail_after(GIVE_UP_S):
            result = await task.result()
    assert asked == ["Ship vase?"]
    assert text_of(result) == "vase: accept (fragile)"


async def test_cancel_ends_the_task_cancelled_and_stops_the_body(
    serve: Callable[..., Any],
) -> None:
    """ToolTask.cancel() (tasks/cancel) on a running body: the task ends cancelled, the body
    stops after the cancel was sent (not before, not at shutdown), and result() raises."""
    async with serve() as served, Client(served.url) as client:
        probe = served.probe
        task = await call_tool_task(client, "forever", {})
        with anyio.fail_after(GIVE_UP_S):
            await probe.started.wait()
        probe.events.append("cancel sent")
        await task.cancel()
        with anyio.fail_after(GIVE_UP_S):
            await probe.stopped.wait()
        final = await task.wait(timeout=GIVE_UP_S)
        with anyio.fail_after(GIVE_UP_S), pytest.raises(ToolError, match="cancelled"):
            await task.result()
    assert final.status == "cancelled"
    assert probe.events == ["body started", "cancel sent", "body stopped"]

"""The official SDK's ``mcp.client.client.Client`` drives our server over real HTTP, on every
Store.

The SDK ships no tasks client, only the hooks for one: a ``ClientExtension`` declares
``io.modelcontextprotocol/tasks`` on every request and a ``ResultClaim`` for
``resultType: "task"``. What follows is the smallest such extension written from the
spec's wire shapes (flat ``CreateTaskResult``, ``tasks/get`` / ``tasks/update`` /
``tasks/cancel`` with ``taskId``, ``Mcp-Name`` from ``name_param``), with nothing of
mcp-tasks in it. The server is strict about ``Mcp-Name`` here
(``ServingOptions(require_name_header=True)``), so every tasks/* request proves the header too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp_types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    Request,
    RequestParams,
    Result,
    TextContent,
)
from pydantic import ConfigDict, TypeAdapter

from mcp_tasks import ANY_OWNER, ServingOptions

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class CreateTaskResult(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskIdParams(RequestParams):
    task_id: str


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # the SDK sends Mcp-Name: <taskId>


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class DetailedTask(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    poll_interval_ms: int | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(Result):
    """An acknowledgement: whatever else it carried would show up as an extra field."""

    model_config = ConfigDict(extra="allow")


#: The client's elicitation callback, as ``Client(elicitation_callback=…)`` takes it.
Elicit = Callable[[ClientRequestContext, ElicitRequestParams], Awaitable[ElicitResult]]
ELICIT_PARAMS: TypeAdapter[ElicitRequestParams] = TypeAdapter(ElicitRequestParams)


async def get(session: ClientSession, task_id: str) -> DetailedTask:
    return await session.send_request(
        GetTaskRequest(params=TaskIdParams(task_id=task_id)), DetailedTask
    )


async def poll_until(
    session: ClientSession, task_id: str, *wanted: str, seen: list[str] | None = None
) -> DetailedTask:
    """tasks/get at the server's pollIntervalMs until the status is one of ``wanted``."""
    with anyio.fail_after(10):  # a failure timeout only
        while True:
            task = await get(session, task_id)
            if seen is not None:
                seen.append(task.status)
            if task.status in wanted:
                return task
            assert task.status not in TERMINAL, f"task ended {task.status}"
            await anyio.sleep((task.poll_interval_ms or 250) / 1000)


class TasksClient(ClientExtension):
    """Declares the extension and resolves a task handle by polling it to its end,
    answering its elicitation requests with ``elicit`` through tasks/update."""

    identifier = EXTENSION

    def __init__(self, elicit: Elicit) -> None:
        self.elicit = elicit
        self.statuses: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        session = ctx.session
        while True:
            task = await poll_until(
                session, created.task_id, "input_required", *TERMINAL, seen=self.statuses
            )
            if task.status != "input_required":
                break
            responses = {}
            for key, request in (task.input_requests or {}).items():
                assert request["method"] == "elicitation/create"
                params = ELICIT_PARAMS.validate_python(request["params"], by_name=False)
                context = ClientRequestContext(session=session, request_id=key)
                answer = await self.elicit(context, params)
                responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
            await session.send_request(
                UpdateTaskRequest(
                    params=UpdateTaskParams(task_id=created.task_id, input_responses=responses)
                ),
                Result,
            )
        if task.status == "completed" and task.result is not None:
            return CallToolResult.model_validate(task.result)
        return CallToolResult(content=[TextContent(text=task.status)], is_error=True)


async def no_elicitation(context: Any, params: ElicitRequestParams) -> ElicitResult:
    raise AssertionError("this task asks nothing")


async def test_a_task_is_created_and_polled_to_completion(serve: Callable[..., Any]) -> None:
    """tools/call answers a flat task handle at once (the claim's model parses it); tasks/get
    sees it working while the body is held, then completed with the tool's result, which
    lives in our Store."""
    async with (
        serve(serving=ServingOptions(require_name_header=True)) as served,
        Client(served.url, extensions=[TasksClient(no_elicitation)]) as client,
    ):
        created = await client.session.call_tool("double", {"n": 21}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        assert created.status == "working"
        working = await get(client.session, created.task_id)
        assert working.status == "working"
        assert (await served.tasks.store.get(created.task_id, ANY_OWNER)).claim is not None
        served.probe.release.set()
        done = await poll_until(client.session, created.task_id, "completed")
    assert done.result is not None
    assert CallToolResult.model_validate(done.result).content == [TextContent(text="42")]
    assert served.probe.task_ids == [created.task_id]


async def test_an_input_round_is_answered_through_tasks_update(
    serve: Callable[..., Any],
) -> None:
    """Client.call_tool with the claim: the body's ctx.elicit parks the task
    input_required, the client's elicitation callback answers, tasks/update delivers it,
    the body resumes, and call_tool returns the task's result."""
    asked: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"note": "fragile"})

    extension = TasksClient(elicit)
    async with (
        serve(serving=ServingOptions(require_name_header=True)) as served,
        Client(served.url, extensions=[extension], elicitation_callback=elicit) as client,
    ):
        result = await client.call_tool("confirm", {"item": "vase"})
        [task_id] = served.probe.task_ids
        record = await served.tasks.store.get(task_id, ANY_OWNER)
    assert asked == ["Ship vase?"]
    assert result.content == [TextContent(text="vase: accept (fragile)")]
    assert "input_required" in extension.statuses
    assert extension.statuses[-1] == "completed"
    assert record.status.value == "completed"


async def test_cancel_ends_the_task_cancelled_and_stops_the_body(
    serve: Callable[..., Any],
) -> None:
    """tasks/cancel on a running body: the ack is empty, the task ends cancelled, and the
    body stops after the cancel was sent (not before, not at shutdown)."""
    async with (
        serve(serving=ServingOptions(require_name_header=True)) as served,
        Client(served.url, extensions=[TasksClient(no_elicitation)]) as client,
    ):
        probe = served.probe
        created = await client.session.call_tool("forever", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(10):  # failure timeouts only
            await probe.started.wait()
        probe.events.append("cancel sent")
        ack = await client.session.send_request(
            CancelTaskRequest(params=TaskIdParams(task_id=created.task_id)), Ack
        )
        with anyio.fail_after(10):
            await probe.stopped.wait()
        final = await poll_until(client.session, created.task_id, *TERMINAL)
    assert set(ack.model_dump(by_alias=True, exclude_none=True)) <= {"resultType", "_meta"}
    assert final.status == "cancelled"
    assert probe.events == ["body started", "cancel sent", "body stopped"]

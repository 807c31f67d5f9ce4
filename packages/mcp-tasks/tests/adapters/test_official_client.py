"""The official SDK client, with a claim for ``resultType: "task"``, runs tasks to the end."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    Request,
    RequestParams,
    Result,
)
from pydantic import ConfigDict

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.testing import running_asgi

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/tasks"


class CreateTaskResult(Result):
    """The claimed shape: a flat task handle."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskIdParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # the SDK sends Mcp-Name: <taskId>


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class DetailedTask(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TasksClient(ClientExtension):
    """Polls a task to its end, answering its input requests with ``answers``."""

    identifier = EXTENSION

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.statuses: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        with anyio.fail_after(10):
            while True:
                task = await ctx.session.send_request(
                    GetTaskRequest(params=TaskIdParams(task_id=created.task_id)), DetailedTask
                )
                self.statuses.append(task.status)
                if task.status == "input_required" and task.input_requests:
                    responses = {k: self.answers[k] for k in task.input_requests}
                    await ctx.session.send_request(
                        UpdateTaskRequest(
                            params=UpdateTaskParams(
                                task_id=created.task_id, input_responses=responses
                            )
                        ),
                        Result,
                    )
                elif task.status == "completed" and task.result is not None:
                    return CallToolResult.model_validate(task.result)
                elif task.status in ("failed", "cancelled"):
                    raise AssertionError(f"task ended {task.status}")
                await anyio.sleep(0.05)


def ask_city(arguments: Any, answers: Any) -> Any:
    if "city" in answers:
        return None
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    return {
        "city": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Which city?", "requestedSchema": schema},
        }
    }


def build(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "client-e2e", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required", preflight=ask_city)
    async def trip(days: int, ctx: TaskContext) -> str:
        city = ctx.input_responses["city"]["content"]["city"]
        await ctx.progress(1, 2, "booking")
        confirm = await ctx.elicit("confirm", f"Book {days} days in {city}?", {"type": "object"})
        return f"{days} days in {city}: {confirm['action']}"

    return mcp


async def test_official_client_runs_a_task_to_completion() -> None:
    """Client.call_tool answers the input round (MRTR) before the task, then the claim polls
    tasks/get (with Mcp-Name), answers the task's own input with tasks/update, and returns
    the task's CallToolResult."""
    extension = TasksClient({"confirm": {"action": "accept", "content": {}}})

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"city": "Lisbon"})

    tasks = Tasks()
    async with (
        running_asgi(build(tasks).streamable_http_app()) as url,
        Client(url, extensions=[extension], elicitation_callback=elicit) as client,
    ):
        result = await client.call_tool("trip", {"days": 3})
    assert result.content[0].model_dump()["text"] == "3 days in Lisbon: accept"
    assert "input_required" in extension.statuses
    assert extension.statuses[-1] == "completed"

"""An answer reaches a body only if it fits the question: an elicitation result with an
action, and an accepted form's content that matches the request's ``requestedSchema``
(types, required fields, no field the form did not ask). Anything else is -32602 naming
the key and the field, and nothing is recorded: in ``tasks/update``, in a synchronous
call's ``inputResponses`` and in the answers a preflight gets."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.domain.answers import answer_mismatch
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICIT: dict[str, Any] = {**TASKS, "elicitation": {}}
SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["colour"],
}
ASK = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Colour?", "requestedSchema": SCHEMA},
}

WRONG_ANSWERS = [
    pytest.param(
        {"action": "accept", "content": {"colour": 5}},
        "field 'colour': 5 is not of type 'string'",
        id="wrong-type",
    ),
    pytest.param(
        {"action": "accept", "content": {}}, "'colour' is a required property", id="missing"
    ),
    pytest.param(
        {"action": "accept", "content": {"color": "red", "colour": "red"}},
        "unknown field 'color' (the form asks for 'colour', 'count')",
        id="unknown-key",
    ),
    pytest.param(
        {"action": "accept", "content": {"colour": "red", "count": 0}},
        "field 'count': 0 is less than the minimum of 1",
        id="out-of-range",
    ),
]
#: The SDK refuses an unknown action in a tools/call's inputResponses itself (-32602
#: "Invalid request parameters"); in tasks/update it is ours to refuse.
WRONG_ANSWERS_IN_UPDATES = [
    *WRONG_ANSWERS,
    pytest.param(
        {"action": "maybe"},
        'the action must be accept, decline or cancel, not "maybe"',
        id="action",
    ),
]


def build(tasks: Tasks, seen: list[Any]) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "answers", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="optional")
    async def paint(ctx: TaskContext) -> str:
        answer = await ctx.elicit("colour", "Colour?", SCHEMA)
        seen.append(answer)
        return f"painted {answer.get('content')}"

    def ask_first(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any]:
        return {} if "colour" in answers else {"colour": ASK}

    @tasks.tool(mcp, mode="optional", preflight=ask_first)
    async def paint_after_preflight(ctx: TaskContext) -> str:
        seen.append(ctx.input_responses.get("colour"))
        return "painted"

    return mcp


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[RawClient, list[Any]]]:
    seen: list[Any] = []
    app = build(Tasks(), seen).streamable_http_app()
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url), seen


async def waiting_task(raw: RawClient) -> str:
    """A task of `paint` waiting for its colour."""
    created = await raw.call("tools/call", {"name": "paint"}, capabilities=ELICIT)
    task_id = str(created["result"]["taskId"])
    await reaches(raw, task_id, "input_required")
    return task_id


async def get(raw: RawClient, task_id: str) -> dict[str, Any]:
    return (await raw.call("tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]


async def reaches(raw: RawClient, task_id: str, status: str) -> None:
    with anyio.fail_after(10):
        while True:
            if (await get(raw, task_id))["status"] == status:
                return
            await anyio.sleep(0.02)


@pytest.mark.parametrize(("answer", "why"), WRONG_ANSWERS_IN_UPDATES)
async def test_tasks_update_refuses_an_answer_that_does_not_fit_and_records_nothing(
    answer: dict[str, Any], why: str
) -> None:
    """-32602 naming the key and what is wrong; the task still waits for the same question
    and the body has seen nothing; a fitting answer then goes through."""
    async with serving() as (raw, seen):
        task_id = await waiting_task(raw)
        refused = await raw.call(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"colour": answer}},
            capabilities=TASKS,
        )
        state = await get(raw, task_id)
        assert refused["error"] == {
            "code": -32602,
            "message": f"Invalid answer to input request 'colour': {why}",
        }
        assert state["status"] == "input_required"
        assert state["inputRequests"] == {"colour": ASK}
        assert seen == []
        good = {"action": "accept", "content": {"colour": "red"}}
        accepted = await raw.call(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"colour": good}},
            capabilities=TASKS,
        )
        assert "error" not in accepted
        await reaches(raw, task_id, "completed")
    assert seen == [good]


@pytest.mark.parametrize(("answer", "why"), WRONG_ANSWERS)
async def test_a_synchronous_call_refuses_an_answer_that_does_not_fit(
    answer: dict[str, Any], why: str
) -> None:
    """Multi-round-trip: the retry carrying a wrong answer is -32602; the body never
    returns from its question with it."""
    async with serving() as (raw, seen):
        reply = await raw.call(
            "tools/call",
            {"name": "paint", "inputResponses": {"colour": answer}},
            capabilities={"elicitation": {}},
        )
    assert reply["error"] == {
        "code": -32602,
        "message": f"Invalid answer to input request 'colour': {why}",
    }
    assert seen == []


@pytest.mark.parametrize(("answer", "why"), WRONG_ANSWERS)
async def test_a_preflight_answer_that_does_not_fit_creates_no_task(
    answer: dict[str, Any], why: str
) -> None:
    """Answers to a preflight's question are held to its schema before any task exists."""
    async with serving() as (raw, seen):
        reply = await raw.call(
            "tools/call",
            {"name": "paint_after_preflight", "inputResponses": {"colour": answer}},
            capabilities=ELICIT,
        )
    assert reply["error"] == {
        "code": -32602,
        "message": f"Invalid answer to input request 'colour': {why}",
    }
    assert seen == []


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"colour": "red"}},
        {"action": "accept", "content": {"colour": "red", "count": 2}},
        {"action": "decline"},
        {"action": "cancel"},
    ],
)
def test_answers_that_fit_pass(answer: dict[str, Any]) -> None:
    """Accepted content that matches, and a decline or cancel without content."""
    assert answer_mismatch(ASK, answer) is None


def test_a_declined_answer_carries_no_content() -> None:
    """Only an accepted elicitation result has content (the schema's rule)."""
    why = answer_mismatch(ASK, {"action": "decline", "content": {"colour": "red"}})
    assert why == "a decline answer carries no content"


def test_only_elicitations_are_held_to_a_schema() -> None:
    """A sampling or roots result has no requestedSchema to fit: not checked here."""
    assert answer_mismatch({"method": "roots/list"}, {"roots": []}) is None


def test_a_form_that_names_no_field_takes_any_content() -> None:
    """A bare confirmation (``properties: {}``) has no field to mistype: its content is
    not refused for keys it does not name (JSON Schema lets them through too)."""
    confirm = {
        "method": "elicitation/create",
        "params": {"message": "Go?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    assert answer_mismatch(confirm, {"action": "accept", "content": {"confirm": True}}) is None

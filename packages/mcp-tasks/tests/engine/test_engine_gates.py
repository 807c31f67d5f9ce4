"""The engine's tasks/* gates, in order, with every code and shape of the wire reference."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks import MemoryTaskStore, NewTask, RequestView, RequireInput, ServingOptions, Tasks
from mcp_tasks.domain.rules import ANY_OWNER

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def view(
    *,
    caps: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    owner: str | None = None,
    version: str = "2026-07-28",
) -> RequestView:
    return RequestView(
        protocol_version=version,
        client_capabilities=TASKS_CAPS if caps is None else caps,
        owner=owner,
        headers=headers,
    )


@pytest.fixture
async def tasks() -> AsyncIterator[Tasks]:
    tasks = Tasks(store=MemoryTaskStore())
    async with tasks.running():
        yield tasks


async def error_of(tasks: Tasks, request: RequestView, method: str, params: Any) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await tasks.engine.handle_tasks_method(request, method, params)
    return caught.value


async def test_capability_gate_runs_before_the_lookup(tasks: Tasks) -> None:
    """Without the extension every tasks/* method is -32021 with requiredCapabilities, even
    for an id that does not exist."""
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        error = await error_of(
            tasks, view(caps={}), method, {"taskId": "gate-test", "inputResponses": {}}
        )
        assert error.code == -32021
        assert error.data == {"requiredCapabilities": TASKS_CAPS}


async def test_capability_gate_runs_before_the_header_gate(tasks: Tasks) -> None:
    """A non-declaring request with a wrong Mcp-Name is told about the capability first."""
    error = await error_of(
        tasks, view(caps={}, headers={"mcp-name": "other"}), "tasks/get", {"taskId": "t"}
    )
    assert error.code == -32021


async def test_a_mismatched_mcp_name_is_a_header_error(tasks: Tasks) -> None:
    """On HTTP, an Mcp-Name that is not params.taskId is -32020, and echoes neither value."""
    secret = "Zq9-secret-task-id"
    mismatch = await error_of(
        tasks, view(headers={"mcp-name": "Zq9-other"}), "tasks/get", {"taskId": secret}
    )
    assert mismatch.code == -32020
    assert secret not in str(mismatch.error.model_dump())
    assert "Zq9-other" not in str(mismatch.error.model_dump())


async def test_a_missing_mcp_name_is_accepted_by_default(tasks: Tasks) -> None:
    """The SDK's client and fastmcp-tasks' send tasks/* without Mcp-Name: by default a
    missing header is no error, and the request is answered as off HTTP."""
    record = await tasks.store.create(NewTask(task_id="t-no-header"))
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        result = await tasks.engine.handle_tasks_method(
            view(headers={}), method, {"taskId": record.task_id, "inputResponses": {}}
        )
        assert result.get("taskId", record.task_id) == record.task_id
    assert (await tasks.store.get(record.task_id, ANY_OWNER)).status == "cancelled"


async def test_a_missing_mcp_name_is_refused_when_required() -> None:
    """``ServingOptions(require_name_header=True)``: a missing header is -32020 as well."""
    tasks = Tasks(store=MemoryTaskStore(), serving=ServingOptions(require_name_header=True))
    async with tasks.running():
        missing = await error_of(tasks, view(headers={}), "tasks/cancel", {"taskId": "t"})
        mismatch = await error_of(
            tasks, view(headers={"mcp-name": "x"}), "tasks/get", {"taskId": "t"}
        )
    assert (missing.code, missing.message) == (
        -32020,
        "Header mismatch: Mcp-Name header is required on tasks/* requests",
    )
    assert mismatch.code == -32020


async def test_a_malformed_base64_mcp_name_is_a_header_error(tasks: Tasks) -> None:
    """A ``=?base64?…?=`` value that does not decode is -32020, and says so (it is present)."""
    await tasks.store.create(NewTask(task_id="t-b64"))
    for value in ("=?base64?!!!?=", "=?base64?dA?=", "=?base64?" + "/w==" + "?="):
        error = await error_of(
            tasks, view(headers={"mcp-name": value}), "tasks/get", {"taskId": "t-b64"}
        )
        assert (error.code, error.message) == (
            -32020,
            "Header mismatch: Mcp-Name header carries a malformed base64 value",
        )


async def test_header_gate_runs_before_params_and_lookup(tasks: Tasks) -> None:
    """A mismatched header on an unknown id is -32020, not -32602."""
    error = await error_of(tasks, view(headers={"mcp-name": "x"}), "tasks/get", {"taskId": "y"})
    assert error.code == -32020


async def test_base64_encoded_mcp_name_is_decoded(tasks: Tasks) -> None:
    """An ``=?base64?…?=`` header value is compared after decoding."""
    record = await tasks.store.create(NewTask(task_id="tâsk"))
    encoded = "=?base64?" + base64.b64encode(record.task_id.encode()).decode() + "?="
    result = await tasks.engine.handle_tasks_method(
        view(headers={"mcp-name": encoded}), "tasks/get", {"taskId": record.task_id}
    )
    assert result["taskId"] == record.task_id


async def test_missing_task_id_is_invalid_params(tasks: Tasks) -> None:
    """No (or a non-string) taskId: -32602 "Missing taskId"."""
    for params in ({}, {"taskId": 7}, None):
        error = await error_of(tasks, view(), "tasks/get", params)
        assert (error.code, error.message) == (-32602, "Missing taskId")


async def test_unknown_and_foreign_ids_answer_identically(tasks: Tasks) -> None:
    """Unknown, foreign: the same -32602 text, with no id in it."""
    record = await tasks.store.create(NewTask(task_id="owned-by-alice", owner="alice"))
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        params = {"inputResponses": {}}
        foreign = await error_of(
            tasks, view(owner="bob"), method, {"taskId": record.task_id, **params}
        )
        unknown = await error_of(tasks, view(owner="bob"), method, {"taskId": "nope", **params})
        assert foreign.error == unknown.error
        assert foreign.error.model_dump() == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
            "data": None,
        }


async def test_removed_methods_and_legacy_era_are_method_not_found(tasks: Tasks) -> None:
    """tasks/list and tasks/result are -32601; so is any tasks/* on a legacy-era request."""
    for method in ("tasks/list", "tasks/result"):
        assert (await error_of(tasks, view(), method, {})).code == -32601
    legacy = await error_of(tasks, view(version="2025-11-25"), "tasks/get", {"taskId": "t"})
    assert legacy.code == -32601


async def test_update_needs_input_responses(tasks: Tasks) -> None:
    """tasks/update without an inputResponses object is -32602."""
    record = await tasks.store.create(NewTask(task_id="t1"))
    error = await error_of(tasks, view(), "tasks/update", {"taskId": record.task_id})
    assert error.code == -32602


async def test_acks_are_empty_and_unknown_keys_are_ignored(tasks: Tasks) -> None:
    """update (even with keys never asked) and cancel (even twice) ack {resultType: complete}."""
    record = await tasks.store.create(NewTask(task_id="t2"))
    update = await tasks.engine.handle_tasks_method(
        view(), "tasks/update", {"taskId": record.task_id, "inputResponses": {"k": {"x": 1}}}
    )
    first = await tasks.engine.handle_tasks_method(view(), "tasks/cancel", {"taskId": "t2"})
    again = await tasks.engine.handle_tasks_method(view(), "tasks/cancel", {"taskId": "t2"})
    assert update == first == again == {"resultType": "complete"}
    got = await tasks.engine.handle_tasks_method(view(), "tasks/get", {"taskId": "t2"})
    assert got["status"] == "cancelled"


async def test_no_headers_means_no_header_gate(tasks: Tasks) -> None:
    """Off HTTP (stdio, in-memory) there is no Mcp-Name to check."""
    await tasks.store.create(NewTask(task_id="t3"))
    result = await tasks.engine.handle_tasks_method(
        view(headers=None), "tasks/get", {"taskId": "t3"}
    )
    assert result["status"] == "working"


ASK_NAME = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object"}},
}


async def test_an_answer_to_an_outstanding_key_must_be_an_object(tasks: Tasks) -> None:
    """A non-object value for an outstanding key is -32602 and changes nothing (it would
    otherwise reach the body as an answer); a non-object under any other key is not read."""
    record = await tasks.store.create(NewTask(task_id="parked"))
    await tasks.store.put_status(record.task_id, RequireInput({"name": ASK_NAME}))
    before = await tasks.store.get(record.task_id, ANY_OWNER)
    for answer in ("Luca", 5, None, ["accept"]):
        error = await error_of(
            tasks, view(), "tasks/update", {"taskId": "parked", "inputResponses": {"name": answer}}
        )
        assert (error.code, error.message) == (
            -32602,
            "Each answer in inputResponses must be a result object",
        )
    assert await tasks.store.get(record.task_id, ANY_OWNER) == before
    ack = await tasks.engine.handle_tasks_method(
        view(), "tasks/update", {"taskId": "parked", "inputResponses": {"stale": 5, "never": "x"}}
    )
    assert ack == {"resultType": "complete"}
    assert await tasks.store.get(record.task_id, ANY_OWNER) == before


async def test_a_cancel_carrying_input_responses_is_still_a_cancel(tasks: Tasks) -> None:
    """Extra params never change what a method does: tasks/cancel ignores inputResponses."""
    record = await tasks.store.create(NewTask(task_id="to-cancel"))
    await tasks.store.put_status(record.task_id, RequireInput({"name": ASK_NAME}))
    await tasks.engine.handle_tasks_method(
        view(),
        "tasks/cancel",
        {"taskId": "to-cancel", "inputResponses": {"name": {"action": "accept"}}},
    )
    after = await tasks.store.get(record.task_id, ANY_OWNER)
    assert (after.status.value, after.input_responses) == ("cancelled", {})


async def test_ids_no_task_can_have_answer_like_unknown_ids(tasks: Tasks) -> None:
    """Control characters, lone surrogates and absurd lengths are answered exactly like an
    unknown id, on every method (the SQL stores' tests show why they never reach a store)."""
    await tasks.store.create(NewTask(task_id="real"))
    for task_id in ("real\x00", "real\ud800", "real\n", "r" * 257, "real" + "\u2028"):
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            params = {"taskId": task_id, "inputResponses": {}}
            error = await error_of(tasks, view(), method, params)
            assert error.error.model_dump() == {
                "code": -32602,
                "message": "Failed to retrieve task: Task not found",
                "data": None,
            }
    assert (await tasks.store.get("real", ANY_OWNER)).status.value == "working"


async def test_update_checks_its_params_before_the_lookup(tasks: Tasks) -> None:
    """Without inputResponses, tasks/update is -32602 "Missing inputResponses" even for an id
    that names no task: params come before the lookup."""
    for task_id in ("unknown", "bad\x00id"):
        error = await error_of(tasks, view(), "tasks/update", {"taskId": task_id})
        assert (error.code, error.message) == (-32602, "Missing inputResponses")

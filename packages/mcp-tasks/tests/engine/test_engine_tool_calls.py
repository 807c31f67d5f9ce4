"""Which tools/call become tasks, input rounds before a task, and how bodies end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from mcp_tasks import (
    Complete,
    MemoryBackend,
    MemoryTaskStore,
    RequestView,
    RunnerOptions,
    StoreOptions,
    TaskContext,
    Tasks,
    current_task_context,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.engine import ToolOptions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.domain.models import StatusChange
    from mcp_tasks.runtime.context import RunningTaskContext

pytestmark = pytest.mark.anyio

EXT: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
EXT_AND_ELICITATION: dict[str, Any] = {**EXT, "elicitation": {}}


def view(caps: dict[str, Any] | None = None, version: str = "2026-07-28") -> RequestView:
    return RequestView(protocol_version=version, client_capabilities=EXT if caps is None else caps)


class Harness:
    """A Tasks on a memory backend the test can inspect."""

    def __init__(self, options: StoreOptions | None = None) -> None:
        self.backend = MemoryBackend()
        self.tasks = Tasks(
            store=MemoryTaskStore(options, backend=self.backend),
            runner=RunnerOptions(lease_ms=2_000, heartbeat_ms=500),
        )
        self.calls = 0

    def result(self, text: str = "ok") -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)])

    async def call(
        self,
        options: ToolOptions | None,
        request: RequestView | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
        responses: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        async def call_next() -> Any:
            self.calls += 1
            if body is not None:
                return await body()
            return self.result()

        return await self.tasks.engine.handle_tool_call(
            request or view(),
            name="tool",
            arguments=arguments or {},
            input_responses=responses,
            call_next=call_next,
            options=options,
        )

    async def wait_terminal(self, task_id: str) -> Any:
        with anyio.fail_after(10):
            while True:
                record = await self.tasks.store.get(task_id, ANY_OWNER)
                if record.status.is_terminal:
                    return record
                await anyio.sleep(0.01)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness()
    async with h.tasks.running():
        yield h


async def test_tools_without_options_and_legacy_requests_run_synchronously(
    harness: Harness,
) -> None:
    """No task options, or a legacy-era request (even one declaring the extension): no task
    (a tool that requires a task is refused there: tests/engine/test_legacy_era.py)."""
    plain = await harness.call(None)
    legacy = await harness.call(ToolOptions(mode="optional"), view(version="2025-11-25"))
    assert isinstance(plain, CallToolResult)
    assert isinstance(legacy, CallToolResult)
    assert harness.backend.tasks == {}


async def test_forbidden_is_always_synchronous(harness: Harness) -> None:
    """A forbidden tool never becomes a task, even for a declaring request."""
    assert isinstance(await harness.call(ToolOptions(mode="forbidden")), CallToolResult)
    assert harness.backend.tasks == {}


async def test_optional_without_the_extension_runs_inline_with_a_context(harness: Harness) -> None:
    """An optional tool called without the extension runs now, with an inline TaskContext."""
    seen: list[TaskContext | None] = []

    async def body() -> CallToolResult:
        seen.append(current_task_context())
        return harness.result()

    result = await harness.call(ToolOptions(mode="optional"), view({}), body=body)
    assert isinstance(result, CallToolResult)
    assert seen[0] is not None
    assert seen[0].task_id is None
    assert harness.backend.tasks == {}


async def test_required_without_the_extension_is_missing_capability(harness: Harness) -> None:
    """A required tool called without the extension: -32021 with requiredCapabilities."""
    with pytest.raises(MCPError) as caught:
        await harness.call(ToolOptions(mode="required"), view({}))
    assert caught.value.code == -32021
    assert caught.value.data == {"requiredCapabilities": EXT}
    assert harness.calls == 0


async def test_policy_function_decides_per_call(harness: Harness) -> None:
    """A callable policy sees the arguments and the request and picks the mode."""

    def policy(arguments: Mapping[str, Any], request: RequestView) -> str:
        return "optional" if arguments.get("big") else "forbidden"

    small = await harness.call(ToolOptions(mode=policy), arguments={"big": False})
    big = await harness.call(ToolOptions(mode=policy), arguments={"big": True})
    assert isinstance(small, CallToolResult)
    assert big["resultType"] == "task"


async def test_create_is_durable_before_the_answer(harness: Harness) -> None:
    """The CreateTaskResult's task is in the store (with its work descriptor) when returned."""
    created = await harness.call(ToolOptions(), arguments={"n": 1})
    record = await harness.tasks.store.get(created["taskId"], None)
    assert record.work is not None
    assert record.work.type == "tool"
    assert record.work.input == {"arguments": {"n": 1}, "inputResponses": {}}


async def test_input_rounds_resolve_before_the_task_exists(harness: Harness) -> None:
    """While the preflight needs answers the call is a sync InputRequiredResult and no task
    exists; the round with every answer creates the task, whose body sees the answers."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    ask = {
        "name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "?", "requestedSchema": schema},
        }
    }

    def preflight(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> Any:
        return None if "name" in answers else ask

    seen: list[Any] = []

    async def body() -> CallToolResult:
        context = current_task_context()
        assert context is not None
        seen.append(context.input_responses["name"])
        return harness.result()

    options = ToolOptions(mode="required", preflight=preflight)
    first = await harness.call(options, view(EXT_AND_ELICITATION), body=body)
    assert first == {"resultType": "input_required", "inputRequests": ask}
    InputRequiredResult.model_validate(first)
    assert harness.backend.tasks == {}
    answer = {"action": "accept", "content": {"name": "Alice"}}
    second = await harness.call(
        options, view(EXT_AND_ELICITATION), responses={"name": answer}, body=body
    )
    assert second["resultType"] == "task"
    assert {"inputRequests", "requestState"}.isdisjoint(second)
    await harness.wait_terminal(second["taskId"])
    assert seen == [answer]


async def test_answers_from_rounds_before_the_task_are_persisted_and_replayed() -> None:
    """The answers of input rounds resolved before the task existed are stored in its work
    beside the arguments, so another node that claims the task later (here: after the
    first node shut down mid-run) runs the body with the same arguments and answers."""
    ask = {"name": {"method": "elicitation/create", "params": {"mode": "form", "message": "?"}}}
    answer = {"action": "accept", "content": {"name": "Alice"}}

    def preflight(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> Any:
        return None if "name" in answers else ask

    async def first_run() -> CallToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    first_node = Harness()
    options = ToolOptions(mode="required", preflight=preflight)
    async with first_node.tasks.running():
        created = await first_node.call(
            options,
            view(EXT_AND_ELICITATION),
            arguments={"n": 1},
            responses={"name": answer},
            body=first_run,
        )
        record = await first_node.tasks.store.get(created["taskId"], ANY_OWNER)
    assert record.work is not None
    assert record.work.input == {"arguments": {"n": 1}, "inputResponses": {"name": answer}}

    seen: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []

    async def replay(context: RunningTaskContext) -> StatusChange:
        seen.append((context.arguments, context.input_responses))
        return Complete({"content": []})

    # The body is handed over by hand: no recovery loop may take the task first.
    second_node = Tasks(
        store=MemoryTaskStore(backend=first_node.backend),
        runner=RunnerOptions(recovery_interval_s=None),
    )
    async with second_node.running():
        await second_node.runner.start(created["taskId"], replay)
        done = await first_node.wait_terminal(created["taskId"])  # the same backend
    assert done.status.value == "completed"
    assert seen == [({"n": 1}, {"name": answer})]


async def test_input_rounds_need_the_capability_they_use(harness: Harness) -> None:
    """An input round asking for elicitation from a request without it: -32021 naming it."""
    ask = {"k": {"method": "elicitation/create", "params": {}}}
    with pytest.raises(MCPError) as caught:
        await harness.call(ToolOptions(preflight=lambda a, r: ask), view(EXT))
    assert caught.value.code == -32021
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_protocol_error_fails_the_task(harness: Harness) -> None:
    """A body raising MCPError ends failed with error {code, message} and no result."""

    async def body() -> Any:
        raise MCPError(code=-32000, message="boom")

    created = await harness.call(ToolOptions(), body=body)
    record = await harness.wait_terminal(created["taskId"])
    assert record.status == "failed"
    assert record.error == {"code": -32000, "message": "boom"}
    assert record.result is None


async def test_tool_error_result_completes_with_is_error(harness: Harness) -> None:
    """A body returning an isError result ends completed, carrying it."""

    async def body() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="bad")], is_error=True)

    created = await harness.call(ToolOptions(), body=body)
    record = await harness.wait_terminal(created["taskId"])
    assert record.status == "completed"
    assert record.result["isError"] is True


async def test_unexpected_exception_and_late_input_fail_the_task(harness: Harness) -> None:
    """A crashing body, or one returning an InputRequiredResult in a task, ends failed -32603."""

    async def crash() -> Any:
        raise RuntimeError("secret detail")

    async def late_input() -> Any:
        return InputRequiredResult(request_state="s")

    for body in (crash, late_input):
        created = await harness.call(ToolOptions(), body=body)
        record = await harness.wait_terminal(created["taskId"])
        assert record.status == "failed"
        assert record.error["code"] == -32603
        assert "secret" not in str(record.error)


async def test_ttl_per_tool_and_per_call(harness: Harness) -> None:
    """ttl_ms may be fixed per tool, None (unlimited), or computed from each call's arguments.
    (The harness's lease is shorter than each TTL: a live lease holds its task, S-TTL.1.)"""
    fixed = await harness.call(ToolOptions(ttl_ms=5_000))
    unlimited = await harness.call(ToolOptions(ttl_ms=None))
    per_call = await harness.call(
        ToolOptions(ttl_ms=lambda args: int(args["ttl"])), arguments={"ttl": 7_000}
    )
    default = await harness.call(ToolOptions())
    assert (fixed["ttlMs"], unlimited["ttlMs"], per_call["ttlMs"]) == (5_000, None, 7_000)
    assert default["ttlMs"] == 3_600_000


async def test_row_cap_is_task_limit_reached() -> None:
    """At the store's row cap a task-creating call is -32603 "Task limit reached"."""
    harness = Harness(StoreOptions(max_rows=1))
    async with harness.tasks.running():
        await harness.call(ToolOptions())
        with pytest.raises(MCPError) as caught:
            await harness.call(ToolOptions())
    assert (caught.value.code, caught.value.message) == (-32603, "Task limit reached")


async def test_owner_cap_is_task_limit_reached_for_this_caller() -> None:
    """At a principal's per-owner cap its task-creating call is -32603 "Task limit reached
    for this caller" (the row cap's answer is plain "Task limit reached"), and another
    principal still creates."""
    harness = Harness(StoreOptions(max_active_per_owner=1))
    alice = RequestView(protocol_version="2026-07-28", client_capabilities=EXT, owner="alice")
    bob = RequestView(protocol_version="2026-07-28", client_capabilities=EXT, owner="bob")
    never: anyio.Event = anyio.Event()

    async def body() -> CallToolResult:
        await never.wait()
        return harness.result()

    async with harness.tasks.running():
        await harness.call(ToolOptions(), alice, body=body)
        with pytest.raises(MCPError) as caught:
            await harness.call(ToolOptions(), alice, body=body)
        assert (await harness.call(ToolOptions(), bob, body=body))["status"] == "working"
        never.set()
    message = "Task limit reached for this caller"
    assert (caught.value.code, caught.value.message) == (-32603, message)


async def test_no_runner_no_task() -> None:
    """Without the lifespan a task-creating call fails -32603 and creates nothing."""
    harness = Harness()
    with pytest.raises(MCPError) as caught:
        await harness.call(ToolOptions())
    assert caught.value.code == -32603
    assert harness.backend.tasks == {}


async def test_a_task_never_asks_for_an_input_kind_its_client_did_not_declare(
    harness: Harness,
) -> None:
    """A body eliciting on a task created without the elicitation capability fails -32021."""

    async def body() -> Any:
        context = current_task_context()
        assert context is not None
        await context.elicit("k", "?", {"type": "object"})
        return harness.result()

    created = await harness.call(ToolOptions(), view(EXT), body=body)
    record = await harness.wait_terminal(created["taskId"])
    assert record.status == "failed"
    assert record.error["code"] == -32021
    assert record.error["data"] == {"requiredCapabilities": {"elicitation": {}}}

"""A task keeps its client's capabilities, and every input request is checked against them
(in process, in manual mode, after a re-run, in a preflight), sub-capabilities included."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks import (
    Fail,
    LocalNotifier,
    MemoryTaskStore,
    MissingClientCapability,
    NewTask,
    RequestView,
    Runner,
    RunnerOptions,
    TaskControl,
    Tasks,
    TaskStatus,
    current_task_context,
    defer,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.engine import ToolOptions
from mcp_tasks.runtime.control import defer_slot
from mcp_tasks.runtime.runner import tool_work
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from mcp_tasks.domain.models import StatusChange
    from mcp_tasks.runtime.context import RunningTaskContext
    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

EXT: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
MESSAGE = "Missing required client capability"


def form(message: str = "?") -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message}}


URL_ELICIT = {
    "method": "elicitation/create",
    "params": {
        "mode": "url",
        "message": "Sign in",
        "url": "https://x.example",
        "elicitationId": "e",
    },
}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
SAMPLE_TOOLS = {
    "method": "sampling/createMessage",
    "params": {"messages": [], "maxTokens": 5, "tools": [{"name": "t", "inputSchema": {}}]},
}
ROOTS = {"method": "roots/list"}
RERUN_ID = "rerun-task-0000000000000000000000000000000"


@pytest.mark.parametrize(
    ("request_", "capabilities", "missing"),
    [
        (form(), {}, {"elicitation": {}}),
        (form(), {"elicitation": {}}, None),  # empty means form (2026-07-28 schema)
        (form(), {"elicitation": {"form": {}}}, None),
        (form(), {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        (form(), {"elicitation": None}, {"elicitation": {}}),
        ({"method": "elicitation/create", "params": {}}, {"elicitation": {}}, None),
        (URL_ELICIT, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (URL_ELICIT, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        (URL_ELICIT, {"elicitation": {"url": {}}}, None),
        (URL_ELICIT, {}, {"elicitation": {"url": {}}}),
        (SAMPLE, {}, {"sampling": {}}),
        (SAMPLE, {"sampling": {}}, None),
        (SAMPLE_TOOLS, {"sampling": {}}, {"sampling": {"tools": {}}}),
        (SAMPLE_TOOLS, {"sampling": {"tools": {}}}, None),
        (ROOTS, {}, {"roots": {}}),
        (ROOTS, {"roots": {}}, None),
    ],
)
def test_one_function_decides_what_may_be_sent(
    request_: Mapping[str, Any], capabilities: Mapping[str, Any], missing: object
) -> None:
    """Each kind and mode of input request against the capabilities that allow it."""
    from mcp_tasks.runtime.context import undeclared_capability  # noqa: PLC0415 (new here)

    assert undeclared_capability(request_, capabilities) == missing


# --- in process: the task's record decides ---------------------------------------------


class Harness:
    def __init__(self, store: Store | None = None) -> None:
        self.tasks = Tasks(store=store or MemoryTaskStore())

    async def create(
        self, caps: Mapping[str, Any], asks: Mapping[str, Any], manual: bool = False
    ) -> str:
        async def call_next() -> Any:
            if manual:
                slot = defer_slot.get()
                assert slot is not None
                slot.deferred = defer(lambda task_id: None)
                return "deferred"
            context = current_task_context()
            assert context is not None
            await context.request_input(asks)
            return "asked"

        created = await self.tasks.engine.handle_tool_call(
            RequestView(protocol_version="2026-07-28", client_capabilities=caps),
            name="ask",
            arguments={},
            input_responses=None,
            call_next=call_next,
            options=ToolOptions(mode="required", manual=manual),
        )
        task_id: str = created["taskId"]
        return task_id

    async def settled(self, task_id: str) -> Any:
        """The record once the body failed or parked in input_required."""
        with anyio.fail_after(10):
            while True:
                record = await self.tasks.store.get(task_id, ANY_OWNER)
                if record.status is not TaskStatus.WORKING:
                    return record
                await anyio.sleep(0.01)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryTaskStore()
        return
    sqlite = SQLiteTaskStore(tmp_path / "tasks.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


async def test_the_task_keeps_the_creating_requests_capabilities(store: Store) -> None:
    """In process and in manual mode, the record holds the creating request's capabilities."""
    caps = {**EXT, "elicitation": {"url": {}}, "sampling": {"tools": {}}}
    harness = Harness(store)
    async with harness.tasks.running():
        inproc = await harness.create(caps, {"k": URL_ELICIT})
        manual = await harness.create(caps, {}, manual=True)
        assert (await harness.settled(inproc)).status is TaskStatus.INPUT_REQUIRED
    assert (await store.get(inproc, ANY_OWNER)).client_capabilities == caps
    assert (await store.get(manual, ANY_OWNER)).client_capabilities == caps


@pytest.mark.parametrize(
    ("caps", "asks", "missing", "named"),
    [
        (
            {**EXT, "elicitation": {}},
            {"k": URL_ELICIT},
            {"elicitation": {"url": {}}},
            "elicitation (url)",
        ),
        (
            {**EXT, "elicitation": {"url": {}}},
            {"k": form()},
            {"elicitation": {"form": {}}},
            "elicitation (form)",
        ),
        (
            {**EXT, "sampling": {}},
            {"k": SAMPLE_TOOLS},
            {"sampling": {"tools": {}}},
            "sampling (tools)",
        ),
        (EXT, {"k": ROOTS}, {"roots": {}}, "roots"),
    ],
)
async def test_a_task_never_sends_what_its_client_did_not_declare(
    store: Store, caps: dict[str, Any], asks: dict[str, Any], missing: dict[str, Any], named: str
) -> None:
    """The body's request fails the task -32021 naming the sub-capability, in the message
    too (a client shows the message, not the data); nothing is asked."""
    harness = Harness(store)
    async with harness.tasks.running():
        task_id = await harness.create(caps, asks)
        record = await harness.settled(task_id)
    assert record.status is TaskStatus.FAILED
    assert record.error == {
        "code": -32021,
        "message": f"{MESSAGE}: {named}",
        "data": {"requiredCapabilities": missing},
    }
    assert record.asked_inputs == {}


async def test_a_re_run_by_another_runner_checks_the_records_capabilities(store: Store) -> None:
    """A second claim of the same task (another runner, e.g. after a crash) takes the
    capabilities from the record: an undeclared kind is refused there too, a declared one sent."""
    await store.create(
        NewTask(
            task_id=RERUN_ID,
            work=tool_work("ask", {}),
            client_capabilities={**EXT, "elicitation": {}},
        )
    )
    seen: list[BaseException] = []
    done = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        try:
            await context.request_input({"url": URL_ELICIT})
        except MissingClientCapability as exc:
            seen.append(exc)
        try:
            return Fail({"code": -32603, "message": "stop"})
        finally:
            done.set()

    first = Runner(store, LocalNotifier(), RunnerOptions(worker_id="first", reap_interval_s=None))
    second = Runner(store, LocalNotifier(), RunnerOptions(worker_id="second", reap_interval_s=None))
    async with first.run(), second.run():
        claimed = await store.claim("first", lease_ms=60_000, task_id=RERUN_ID)
        assert claimed is not None
        await store.release(claimed.lease)  # the first runner is gone
        await second.start(RERUN_ID, body)
        with anyio.fail_after(10):
            await done.wait()
    assert len(seen) == 1
    assert isinstance(seen[0], MissingClientCapability)
    assert seen[0].required == {"elicitation": {"url": {}}}
    assert (await store.get(RERUN_ID, ANY_OWNER)).asked_inputs == {}


async def test_manual_mode_refuses_an_undeclared_input_request(store: Store) -> None:
    """TaskControl.require_input checks the task's record: refused, nothing written."""
    harness = Harness(store)
    async with harness.tasks.running():
        task_id = await harness.create({**EXT, "elicitation": {}}, {}, manual=True)
    control = TaskControl(store)
    before = await store.get(task_id, ANY_OWNER)
    with pytest.raises(MissingClientCapability) as caught:
        await control.require_input(task_id, {"url": URL_ELICIT})
    assert caught.value.required == {"elicitation": {"url": {}}}
    with pytest.raises(MissingClientCapability) as caught:
        await control.require_input(task_id, {"s": SAMPLE})
    assert caught.value.required == {"sampling": {}}
    after = await store.get(task_id, ANY_OWNER)
    assert (after.revision, after.status) == (before.revision, TaskStatus.WORKING)
    await control.require_input(task_id, {"f": form()})
    assert (await store.get(task_id, ANY_OWNER)).status is TaskStatus.INPUT_REQUIRED


async def test_a_preflight_checks_sub_capabilities() -> None:
    """A preflight asking URL mode of a client that declared only form: -32021 naming
    elicitation.url, and no task."""
    tasks = Tasks()

    def preflight(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any]:
        return {"login": URL_ELICIT}

    async def call_next() -> Any:
        raise AssertionError("the tool must not run")

    async with tasks.running():
        with pytest.raises(MCPError) as caught:
            await tasks.engine.handle_tool_call(
                RequestView("2026-07-28", {**EXT, "elicitation": {}}),
                name="ask",
                arguments={},
                input_responses=None,
                call_next=call_next,
                options=ToolOptions(mode="required", preflight=preflight),
            )
    assert caught.value.error.model_dump(exclude_none=True) == {
        "code": -32021,
        "message": f"{MESSAGE}: elicitation (url)",
        "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
    }

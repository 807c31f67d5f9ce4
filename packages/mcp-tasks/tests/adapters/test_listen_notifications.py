"""``subscriptions/listen`` with ``taskIds`` over real HTTP: raw SSE for the exact messages,
and the official SDK's client (its ``listen()`` takes only the core filters, so the request
is sent through ``client.session.send_request``; ``notifications/tasks`` arrive through a
``NotificationBinding``).

Each test that does not depend on the SDK's own listen handler runs on two servers: an
``MCPServer`` (the middleware beside the SDK's ``ListenHandler``) and a FastMCP server with
our FastMCP extension (no listen handler: the middleware serves the request alone).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2 as httpx
import pytest
from fastmcp import FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from fastmcp.utilities.tasks import TaskConfig
from mcp.client.extension import NotificationBinding
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    SubscriptionFilter,
    SubscriptionsListenRequest,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from pydantic import BaseModel, ConfigDict

from mcp_tasks import LocalNotifier, Notifier, TaskContext, Tasks, current_task_context
from mcp_tasks.client import TaskHandle, TasksClientExtension, start_tool, tasks_client
from mcp_tasks.engine.task_watch import MAX_LISTEN_TASK_IDS
from mcp_tasks.testing import (
    MessageStream,
    RawClient,
    decode,
    running,
    running_asgi,
    static_auth,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.runtime.notifier import Subscription

pytestmark = pytest.mark.anyio

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
PLAIN: dict[str, Any] = {"elicitation": {}}


class Gate:
    """Lets the test step a task body: progress, input, then the end."""

    def __init__(self) -> None:
        self.go = anyio.Event()


def build(tasks: Tasks, gate: Gate, *, auth: bool) -> MCPServer[Any]:
    extra: dict[str, Any] = {}
    if auth:
        extra = static_auth("alice", "bob")
    mcp: MCPServer[Any] = MCPServer(
        "listen", extensions=[tasks.extension()], lifespan=tasks.lifespan, **extra
    )

    @tasks.tool(mcp, mode="required")
    async def stepped(ctx: TaskContext) -> str:
        await gate.go.wait()
        await ctx.progress(1, 2, "halfway")
        answer = await ctx.elicit("ok", "Go on?", {"type": "object", "properties": {}})
        return f"done {answer.get('action')}"

    @tasks.tool(mcp, mode="required")
    async def quick() -> str:
        return "quick"

    return mcp


def build_fastmcp(tasks: Tasks, gate: Gate, *, auth: bool) -> FastMCP:
    """:func:`build`'s tools as FastMCP task tools; ``auth``: FastMCP's own static tokens,
    one principal each for alice and bob."""
    verifier = StaticTokenVerifier(
        {name: {"client_id": "test-client", "sub": name} for name in ("alice", "bob")}
    )
    mcp = FastMCP("listen-fastmcp", auth=verifier if auth else None)
    mcp.add_extension(tasks.fastmcp_extension())
    required = TaskConfig(mode="required")

    @mcp.tool(task=required)
    async def stepped() -> str:
        ctx = current_task_context()
        assert ctx is not None
        await gate.go.wait()
        await ctx.progress(1, 2, "halfway")
        answer = await ctx.elicit("ok", "Go on?", {"type": "object", "properties": {}})
        return f"done {answer.get('action')}"

    @mcp.tool(task=required)
    async def quick() -> str:
        return "quick"

    return mcp


@pytest.fixture(params=["mcpserver", "fastmcp"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which server a test runs on (see the module docstring)."""
    return cast("str", request.param)


@asynccontextmanager
async def serving(
    tasks: Tasks, *, auth: bool = False, kind: str = "mcpserver"
) -> AsyncIterator[tuple[str, httpx.AsyncClient, Gate]]:
    gate = Gate()
    app = (
        running(build_fastmcp(tasks, gate, auth=auth))
        if kind == "fastmcp"
        else running_asgi(build(tasks, gate, auth=auth).streamable_http_app())
    )
    async with app as url, httpx.AsyncClient(timeout=30) as http:
        yield url, http, gate


def listen(
    client: RawClient,
    task_ids: object,
    *,
    capabilities: dict[str, Any] | None = None,
    **filters: object,
) -> AbstractAsyncContextManager[MessageStream]:
    notifications = {"taskIds": task_ids, **filters}
    return client.stream(
        "subscriptions/listen",
        {"notifications": notifications},
        capabilities=capabilities,
        request_id="listen-1",
    )


async def wait_status(client: RawClient, task_id: str, status: str) -> dict[str, Any]:
    """Poll tasks/get until the task has ``status`` (20 s failure timeout)."""
    with anyio.fail_after(20):
        while True:
            got: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if got["status"] == status:
                return got
            await anyio.sleep(0.05)


async def create(client: RawClient, tool: str) -> str:
    reply = await client.call("tools/call", {"name": tool, "arguments": {}})
    task_id: str = reply["result"]["taskId"]
    return task_id


async def test_the_owner_hears_every_change_after_the_ack_and_the_stream_ends(kind: str) -> None:
    """The acknowledgment comes first and lists only the caller's own ids; then each change
    (working, statusMessage, input_required, completed) arrives as notifications/tasks with
    the task's full state and the subscription id; the stream ends with its result."""
    async with serving(Tasks(), auth=True, kind=kind) as (url, http, gate):
        alice, bob = RawClient(http, url, token="alice"), RawClient(http, url, token="bob")
        mine, theirs = await create(alice, "stepped"), await create(bob, "stepped")
        async with listen(alice, [mine, theirs, "no-such-task"]) as stream:
            ack = await stream.next()
            assert ack is not None
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [mine]}
            assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
            first = await stream.next()
            assert first is not None
            assert first["method"] == "notifications/tasks"
            assert (first["params"]["taskId"], first["params"]["status"]) == (mine, "working")
            gate.go.set()
            seen: list[dict[str, Any]] = []
            while not seen or seen[-1]["status"] != "input_required":
                message = await stream.next()
                assert message is not None
                seen.append(message["params"])
            assert seen[-1]["inputRequests"]["ok"]["method"] == "elicitation/create"
            assert "halfway (1/2)" in [s.get("statusMessage") for s in seen]
            answer = {"ok": {"action": "accept", "content": {}}}
            await alice.call("tasks/update", {"taskId": mine, "inputResponses": answer})
            while seen[-1]["status"] != "completed":
                message = await stream.next()
                assert message is not None
                assert message["method"] == "notifications/tasks"
                assert message["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
                assert message["params"]["taskId"] == mine
                seen.append(message["params"])
            got = (await alice.call("tasks/get", {"taskId": mine}))["result"]
            del got["resultType"], got["_meta"]  # the SDK stamps serverInfo on results
            pushed = {k: v for k, v in seen[-1].items() if k != "_meta"}
            assert pushed == got
            end = await stream.next()
            assert end is not None
            assert end["id"] == "listen-1"
            assert end["result"]["resultType"] == "complete"
            assert end["result"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
            if kind == "fastmcp":  # the SDK's stamp, on the result nobody but us shapes
                assert end["result"]["_meta"][SERVER_INFO]["name"] == "listen-fastmcp"
            assert await stream.next() is None


async def test_another_owners_task_is_never_acknowledged_nor_notified(kind: str) -> None:
    """Bob naming alice's task gets an acknowledgment without it, no notification, and a
    graceful end at once: it watches nothing."""
    async with serving(Tasks(), auth=True, kind=kind) as (url, http, gate):
        alice, bob = RawClient(http, url, token="alice"), RawClient(http, url, token="bob")
        task_id = await create(alice, "stepped")
        gate.go.set()
        async with listen(bob, [task_id]) as stream:
            ack = await stream.next()
            assert ack is not None
            assert ack["params"]["notifications"] == {"taskIds": []}
            end = await stream.next()
            assert end is not None
            assert end["result"]["_meta"][SUBSCRIPTION_ID] == "listen-1"


async def test_a_terminal_task_is_sent_once_then_the_stream_ends(kind: str) -> None:
    """A task already finished at listen time: its final state, then the end."""
    async with serving(Tasks(), kind=kind) as (url, http, _):
        client = RawClient(http, url)
        task_id = await create(client, "quick")
        await wait_status(client, task_id, "completed")
        async with listen(client, [task_id]) as stream:
            methods = []
            while (message := await stream.next()) is not None:
                methods.append(message.get("method", "result"))
        assert methods == [
            "notifications/subscriptions/acknowledged",
            "notifications/tasks",
            "result",
        ]


async def test_undeclared_task_ids_answer_32021_with_http_400(kind: str) -> None:
    """A listen that names taskIds without declaring the extension: -32021, HTTP 400."""
    async with serving(Tasks(), kind=kind) as (url, http, _):
        client = RawClient(http, url)
        response = await client.post(
            "subscriptions/listen", {"notifications": {"taskIds": []}}, capabilities=PLAIN
        )
        assert response.status_code == 400
        assert decode(response)["error"]["code"] == -32021


@pytest.mark.parametrize(
    "task_ids",
    ["abc", [1, 2], None, {"a": 1}, ["x"] * 0 + [f"t{i}" for i in range(MAX_LISTEN_TASK_IDS + 1)]],
    ids=["string", "numbers", "null", "object", "too-many"],
)
async def test_malformed_or_oversized_task_ids_answer_32602(task_ids: object, kind: str) -> None:
    """taskIds that is not an array of strings, or names more than 1000: -32602, HTTP 400."""
    async with serving(Tasks(), kind=kind) as (url, http, _):
        client = RawClient(http, url)
        response = await client.post(
            "subscriptions/listen", {"notifications": {"taskIds": task_ids}}
        )
        assert response.status_code == 400
        assert decode(response)["error"]["code"] == -32602


async def test_a_listen_without_task_ids_is_the_sdks_own() -> None:
    """Core filters alone: the SDK's acknowledgment, untouched (no taskIds key)."""
    async with serving(Tasks()) as (url, http, _):
        client = RawClient(http, url)
        async with client.stream(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
        ) as stream:
            ack = await stream.next()
        assert ack is not None
        assert ack["params"]["notifications"] == {"toolsListChanged": True}


async def test_core_filters_are_still_served_beside_task_ids() -> None:
    """taskIds with toolsListChanged: both are acknowledged, and the stream stays open for
    tool changes after the tasks end."""
    async with serving(Tasks()) as (url, http, _):
        client = RawClient(http, url)
        task_id = await create(client, "quick")
        async with listen(client, [task_id], toolsListChanged=True) as stream:
            ack = await stream.next()
            assert ack is not None
            assert ack["params"]["notifications"] == {
                "toolsListChanged": True,
                "taskIds": [task_id],
            }
            statuses = []
            while not statuses or statuses[-1] != "completed":
                message = await stream.next()
                assert message is not None
                statuses.append(message["params"]["status"])
            with pytest.raises(TimeoutError):
                await stream.next(timeout_s=0.5)


async def test_fastmcp_answers_a_listen_without_task_ids_as_it_does_without_us() -> None:
    """FastMCP serves no subscriptions/listen: a listen without taskIds gets exactly the
    answer (status and body) of the same FastMCP server without our extension."""
    request = {"notifications": {"toolsListChanged": True}}
    answers = []
    for mcp in (build_fastmcp(Tasks(), Gate(), auth=False), FastMCP("listen-fastmcp")):
        async with running(mcp) as url, httpx.AsyncClient(timeout=30) as http:
            response = await RawClient(http, url).post("subscriptions/listen", request)
            answers.append((response.status_code, decode(response)))
    ours, theirs = answers
    assert ours == theirs
    assert ours[1]["error"]["code"] == -32601


async def test_fastmcp_honours_only_task_ids_and_ends_with_the_tasks() -> None:
    """On FastMCP nothing serves the core filters: asked beside taskIds, they are left out
    of the acknowledgment, and the stream still ends once the tasks are terminal."""
    async with serving(Tasks(), kind="fastmcp") as (url, http, _):
        client = RawClient(http, url)
        task_id = await create(client, "quick")
        async with listen(client, [task_id], toolsListChanged=True) as stream:
            messages = []
            while (message := await stream.next()) is not None:
                messages.append(message)
        assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
        assert messages[0]["params"]["notifications"] == {"taskIds": [task_id]}
        assert [m["params"]["status"] for m in messages[1:-1]][-1] == "completed"
        assert messages[-1]["result"]["_meta"][SUBSCRIPTION_ID] == "listen-1"


async def test_a_malformed_core_filter_beside_task_ids_answers_32602(kind: str) -> None:
    """The SDK checks a listen's filters before its handler; served without it (FastMCP),
    the middleware makes the same check: -32602, HTTP 400."""
    async with serving(Tasks(), kind=kind) as (url, http, _):
        response = await RawClient(http, url).post(
            "subscriptions/listen", {"notifications": {"taskIds": [], "toolsListChanged": "x"}}
        )
        assert response.status_code == 400
        assert decode(response)["error"]["code"] == -32602


class Broken:
    """A notifier whose every call fails."""

    async def publish(self, task_id: str) -> None:
        raise RuntimeError("publish broke")

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        raise RuntimeError("subscribe broke")

    def running(self) -> AbstractAsyncContextManager[None]:
        raise RuntimeError("running broke")


class Counting:
    """A custom notifier that wraps the default one and counts what it publishes."""

    def __init__(self, inner: Notifier) -> None:
        self.inner = inner
        self.published = 0

    async def publish(self, task_id: str) -> None:
        self.published += 1
        await self.inner.publish(task_id)

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        return self.inner.subscribe(*task_ids)

    def running(self) -> AbstractAsyncContextManager[None]:
        return self.inner.running()


async def test_a_failing_notifier_fails_no_request_and_no_task(
    caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """Every notifier call raising: tasks still run and answer, the failures are logged."""
    async with serving(Tasks(notifier=Broken()), kind=kind) as (url, http, gate):
        client = RawClient(http, url)
        task_id = await create(client, "stepped")
        gate.go.set()
        await wait_status(client, task_id, "input_required")
        answer = {"ok": {"action": "accept", "content": {}}}
        reply = await client.call("tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert "result" in reply
        assert (await wait_status(client, task_id, "completed"))["result"]["content"][0][
            "text"
        ] == "done accept"
    assert "publish broke" in caplog.text
    assert task_id not in caplog.text


async def test_notifications_off_watch_nothing_and_tasks_still_finish(kind: str) -> None:
    """Tasks(notifier=None): the acknowledgment lists no task; tasks finish by polling."""
    async with serving(Tasks(notifier=None), kind=kind) as (url, http, _):
        client = RawClient(http, url)
        task_id = await create(client, "quick")
        async with listen(client, [task_id]) as stream:
            ack = await stream.next()
            assert ack is not None
            assert ack["params"]["notifications"] == {"taskIds": []}
        await wait_status(client, task_id, "completed")


async def test_a_custom_notifier_can_wrap_the_default_one(kind: str) -> None:
    """A wrapper around LocalNotifier sees every publish, and listen streams still hear."""
    counting = Counting(LocalNotifier())
    async with serving(Tasks(notifier=counting), kind=kind) as (url, http, gate):
        client = RawClient(http, url)
        task_id = await create(client, "stepped")
        async with listen(client, [task_id]) as stream:
            await stream.next()  # the ack
            await stream.next()  # working
            gate.go.set()
            message = await stream.next()
            assert message is not None
            assert message["params"]["statusMessage"] == "halfway (1/2)"
    assert counting.published >= 1


class TaskNote(BaseModel):
    """The params of notifications/tasks as the official client's binding validates them."""

    model_config = ConfigDict(extra="allow")
    taskId: str
    status: str


class HearsTasks(TasksClientExtension):
    """The tasks extension plus a binding that observes notifications/tasks."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[TaskNote] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def hear(note: TaskNote) -> None:
            self.heard.append(note)

        binding = NotificationBinding(
            method="notifications/tasks", params_type=TaskNote, handler=hear
        )
        return [binding]


async def test_the_official_sdk_client_hears_notifications_tasks(kind: str) -> None:
    """The official SDK's Client (mcp 2.3), with a notification binding and a raw listen
    request naming taskIds (its listen() takes only the core filters): the request ends
    with the graceful result once the task completed, and the binding heard the task's
    states up to completed."""
    async with serving(Tasks(), kind=kind) as (url, _, _):
        extension = HearsTasks()
        async with tasks_client(url, extension=extension) as client:
            handle = await start_tool(client, "quick", {})
            assert isinstance(handle, TaskHandle)
            listen_request = SubscriptionsListenRequest(
                params=SubscriptionsListenRequestParams(
                    notifications=SubscriptionFilter.model_validate({"taskIds": [handle.task_id]})
                )
            )
            with anyio.fail_after(30):
                ended = await client.session.send_request(
                    cast("Any", listen_request), SubscriptionsListenResult
                )
                # The binding delivers through its own queue, after the request ended.
                while not extension.heard or extension.heard[-1].status != "completed":  # noqa: ASYNC110
                    await anyio.sleep(0.01)
        assert ended.result_type == "complete"
        assert {n.taskId for n in extension.heard} == {handle.task_id}

"""The fast path answers with the SDK's bytes: one corpus of valid and hostile requests sent
to the SDK's app and to the same app behind :class:`TasksFastPath`, compared byte for byte
(status, headers but the date, body), and the requests the fast path must answer itself
counted, so a fast path that quietly fell through for everything could not pass."""

from __future__ import annotations

import base64
import json
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import pytest
from fast_path_servers import build_server, start
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Mount, Route

from mcp_tasks import MemoryTaskStore, Tasks
from mcp_tasks.adapters import fast_path
from mcp_tasks.adapters.fast_path import TasksFastPath, with_fast_path
from mcp_tasks.domain.clock import ManualClock
from mcp_tasks.testing import PROTOCOL, WITH_TASKS, RawClient, running_asgi, static_auth

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.mcpserver import MCPServer

pytestmark = pytest.mark.anyio

#: Headers that name the moment or the server process, not the answer.
UNCOMPARED = {"date", "server"}
#: Headers whose value is random (a legacy-era session id): compared by presence.
RANDOM = {"mcp-session-id"}


@dataclass
class Case:
    what: str
    body: bytes | None
    headers: dict[str, str]
    taken: bool  # the fast path answers it itself (else: the SDK does, through it)
    method: str = "POST"
    path: str = "/mcp"
    per_path_task: bool = False  # the request changes its task: each path gets its own
    chunked: bool = False  # sent without a Content-Length
    repeated: tuple[str, str] | None = None  # one more line of a header already sent
    token: str | None = "alice"  # the bearer token sent, when the server authenticates
    extra: dict[str, Any] = field(default_factory=dict)


def headers_for(method: str, task_id: str | None = None, **overrides: str | None) -> dict[str, str]:
    sent: dict[str, str | None] = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
        "mcp-name": task_id,
    }
    sent.update(overrides)
    return {k: v for k, v in sent.items() if v is not None}


def envelope(
    method: str,
    params: Any,
    *,
    request_id: Any = 1,
    capabilities: Any = WITH_TASKS,
    version: Any = PROTOCOL,
) -> dict[str, Any]:
    if isinstance(params, dict):
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            },
        }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def encode(message: Any) -> bytes:
    return json.dumps(message).encode()


def with_meta(task_id: str, sent_meta: Any, **params: Any) -> bytes:
    """A ``tasks/get`` of ``task_id`` whose ``params._meta`` is ``sent_meta`` (``params``
    beside it)."""
    sent = {"taskId": task_id, **params, "_meta": sent_meta}
    return encode({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": sent})


#: The envelope pair a 2026-07-28 request carries in ``params._meta``.
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
}


def corpus(done: str, parked: str, *, json_response: bool, authenticated: bool) -> list[Case]:
    """``done``: a completed task; ``parked``: a task waiting for input (both shared, both
    alice's when the server authenticates). ``json_response``: the app answers JSON only, so
    an Accept without SSE is enough."""
    get = encode(envelope("tasks/get", {"taskId": done}))
    get_headers = headers_for("tasks/get", done)
    cases = [
        Case("get a completed task", get, get_headers, taken=True),
        Case(
            "get a parked task",
            encode(envelope("tasks/get", {"taskId": parked})),
            headers_for("tasks/get", parked),
            taken=True,
        ),
        Case(
            "get, string id",
            encode(envelope("tasks/get", {"taskId": done}, request_id="a")),
            get_headers,
            taken=True,
        ),
        Case(
            "get, an id past 64 bits",
            encode(envelope("tasks/get", {"taskId": done}, request_id=2**70)),
            get_headers,
            taken=True,
        ),
        Case("get, no Mcp-Name", get, headers_for("tasks/get"), taken=True),
        Case(
            "get, Mcp-Name in base64",
            get,
            headers_for("tasks/get", "=?base64?" + base64.b64encode(done.encode()).decode() + "?="),
            taken=True,
        ),
        Case("get, Accept */*", get, headers_for("tasks/get", done, accept="*/*"), taken=True),
        Case(
            "get, extra envelope key",
            encode({**envelope("tasks/get", {"taskId": done}), "extra": 1}),
            get_headers,
            taken=True,
        ),
        Case(
            "get, allowed Origin",
            get,
            headers_for("tasks/get", done, origin="http://localhost:3000"),
            taken=True,
        ),
        Case(
            "get, unknown task",
            encode(envelope("tasks/get", {"taskId": "nope"})),
            headers_for("tasks/get", "nope"),
            taken=True,
        ),
        Case(
            "get, a 300-character id",
            encode(envelope("tasks/get", {"taskId": "x" * 300})),
            headers_for("tasks/get", "x" * 300),
            taken=True,
        ),
        Case(
            "get, NUL in id",
            encode(envelope("tasks/get", {"taskId": "a\u0000b"})),
            headers_for("tasks/get"),
            taken=True,
        ),
        Case(
            "get, no taskId",
            encode(envelope("tasks/get", {})),
            headers_for("tasks/get"),
            taken=True,
        ),
        Case(
            "get, taskId a number",
            encode(envelope("tasks/get", {"taskId": 7})),
            headers_for("tasks/get"),
            taken=True,
        ),
        Case("get, Mcp-Name mismatch", get, headers_for("tasks/get", "other"), taken=True),
        Case(
            "get, no tasks capability",
            encode(envelope("tasks/get", {"taskId": done}, capabilities={})),
            get_headers,
            taken=True,
        ),
        Case(
            "get, extension not an object",
            encode(
                envelope(
                    "tasks/get",
                    {"taskId": done},
                    capabilities={"extensions": {"io.modelcontextprotocol/tasks": True}},
                )
            ),
            get_headers,
            taken=True,
        ),
        Case(
            "update, inputResponses missing",
            encode(envelope("tasks/update", {"taskId": parked})),
            headers_for("tasks/update", parked),
            taken=True,
        ),
        Case(
            "update, an answer",
            None,
            {},
            taken=True,
            per_path_task=True,
            extra={
                "method": "tasks/update",
                "params": {
                    "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}
                },
            },
        ),
        Case(
            "cancel",
            None,
            {},
            taken=True,
            per_path_task=True,
            extra={"method": "tasks/cancel", "params": {}},
        ),
        # --- everything below is the SDK's to answer ---------------------------------------
        Case(
            "capabilities not an object",
            encode(envelope("tasks/get", {"taskId": done}, capabilities=[])),
            get_headers,
            taken=False,
        ),
        Case(
            "capabilities null",
            encode(envelope("tasks/get", {"taskId": done}, capabilities=None)),
            get_headers,
            taken=False,
        ),
        Case(
            "no Content-Type",
            get,
            headers_for("tasks/get", done, **{"content-type": None}),
            taken=False,
        ),
        Case(
            "text/plain",
            get,
            headers_for("tasks/get", done, **{"content-type": "text/plain"}),
            taken=False,
        ),
        Case("empty Accept", get, headers_for("tasks/get", done, accept=""), taken=False),
        Case(
            "Accept JSON only",
            get,
            headers_for("tasks/get", done, accept="application/json"),
            taken=json_response,
        ),
        Case(
            "Accept SSE only",
            get,
            headers_for("tasks/get", done, accept="text/event-stream"),
            taken=False,
        ),
        Case(
            "no protocol header",
            get,
            headers_for("tasks/get", done, **{"mcp-protocol-version": None}),
            taken=False,
        ),
        Case(
            "handshake-era protocol header",
            get,
            headers_for("tasks/get", done, **{"mcp-protocol-version": "2025-06-18"}),
            taken=False,
        ),
        Case(
            "unknown protocol header",
            get,
            headers_for("tasks/get", done, **{"mcp-protocol-version": "1999-01-01"}),
            taken=False,
        ),
        Case(
            "body version unsupported",
            encode(envelope("tasks/get", {"taskId": done}, version="1999-01-01")),
            get_headers,
            taken=False,
        ),
        Case(
            "body version not a string",
            encode(envelope("tasks/get", {"taskId": done}, version=20260728)),
            get_headers,
            taken=False,
        ),
        Case(
            "Mcp-Method mismatch",
            get,
            headers_for("tasks/get", done, **{"mcp-method": "x"}),
            taken=False,
        ),
        Case(
            "no Mcp-Method",
            get,
            headers_for("tasks/get", done, **{"mcp-method": None}),
            taken=False,
        ),
        Case("bad Host", get, headers_for("tasks/get", done, host="evil.example:80"), taken=False),
        Case(
            "bad Origin",
            get,
            headers_for("tasks/get", done, origin="http://evil.example"),
            taken=False,
        ),
        Case(
            "bad JSON",
            b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"',
            get_headers,
            taken=False,
        ),
        Case("empty body", b"", get_headers, taken=False),
        Case("a UTF-8 BOM before the JSON", b"\xef\xbb\xbf" + get, get_headers, taken=False),
        Case("the JSON in UTF-16", get.decode().encode("utf-16"), get_headers, taken=False),
        Case(
            "no jsonrpc",
            encode(
                {k: v for k, v in envelope("tasks/get", {"taskId": done}).items() if k != "jsonrpc"}
            ),
            get_headers,
            taken=False,
        ),
        Case(
            "a batch", encode([envelope("tasks/get", {"taskId": done})]), get_headers, taken=False
        ),
        Case(
            "a notification",
            encode({k: v for k, v in envelope("tasks/get", {"taskId": done}).items() if k != "id"}),
            get_headers,
            taken=False,
        ),
        Case(
            "id null",
            encode(envelope("tasks/get", {"taskId": done}, request_id=None)),
            get_headers,
            taken=False,
        ),
        Case(
            "id a float",
            encode(envelope("tasks/get", {"taskId": done}, request_id=1.5)),
            get_headers,
            taken=False,
        ),
        Case(
            "id true",
            encode(envelope("tasks/get", {"taskId": done}, request_id=True)),
            get_headers,
            taken=False,
        ),
        Case(
            "jsonrpc 1.0",
            encode({**envelope("tasks/get", {"taskId": done}), "jsonrpc": "1.0"}),
            get_headers,
            taken=False,
        ),
        Case(
            "method a list",
            encode({**envelope("tasks/get", {"taskId": done}), "method": []}),
            get_headers,
            taken=False,
        ),
        Case("params a list", encode(envelope("tasks/get", [done])), get_headers, taken=False),
        Case(
            "params null",
            encode({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": None}),
            get_headers,
            taken=False,
        ),
        Case(
            "no params",
            encode({"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}),
            get_headers,
            taken=False,
        ),
        Case(
            "no _meta",
            encode({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": done}}),
            get_headers,
            taken=False,
        ),
        Case(
            "_meta progressToken an object",
            encode(
                {
                    **envelope("tasks/get", {"taskId": done}),
                    "params": {
                        "taskId": done,
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                            "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
                            "progressToken": {"a": 1},
                        },
                    },
                }
            ),
            get_headers,
            taken=False,
        ),
        # The params model's own answers, where the fast path checks without it: a
        # progressToken it takes (a string, an integer, and true and 1.0, which its lax
        # mode reads as integers) and one it refuses.
        *(
            Case(
                f"_meta progressToken {json.dumps(token)}",
                with_meta(done, {**ENVELOPE, "progressToken": token}),
                get_headers,
                taken=taken,
            )
            for token, taken in (
                ("p-1", True),
                (7, True),
                (2**70, True),
                (True, True),
                (1.0, True),
                (1.5, False),
                (None, False),
                ([], False),
            )
        ),
        Case(
            "_meta with clientInfo and keys of its own",
            with_meta(
                done,
                {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": "c"}, "x": [1]},
            ),
            get_headers,
            taken=True,
        ),
        Case(
            "params with a key named meta",
            with_meta(done, ENVELOPE, meta={"progressToken": []}),
            get_headers,
            taken=True,
        ),
        # The SDK's classifier's rungs, where the fast path checks without it.
        Case(
            "_meta without the protocol version",
            with_meta(done, {k: v for k, v in ENVELOPE.items() if "protocol" not in k}),
            get_headers,
            taken=False,
        ),
        Case(
            "_meta without the capabilities",
            with_meta(done, {k: v for k, v in ENVELOPE.items() if "Capab" not in k}),
            get_headers,
            taken=False,
        ),
        Case("_meta a list", with_meta(done, [ENVELOPE]), get_headers, taken=False),
        Case("_meta a string", with_meta(done, PROTOCOL), get_headers, taken=False),
        Case(
            "protocol version null",
            with_meta(done, {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": None}),
            get_headers,
            taken=False,
        ),
        Case(
            "Mcp-Method of another tasks method",
            get,
            headers_for("tasks/get", done, **{"mcp-method": "tasks/cancel"}),
            taken=False,
        ),
        Case(
            "Mcp-Method in capitals",
            get,
            headers_for("tasks/get", done, **{"mcp-method": "TASKS/GET"}),
            taken=False,
        ),
        Case(
            "tasks/list (removed)",
            encode(envelope("tasks/list", {})),
            headers_for("tasks/list"),
            taken=False,
        ),
        Case(
            "tasks/result (removed)",
            encode(envelope("tasks/result", {"taskId": done})),
            headers_for("tasks/result", done),
            taken=False,
        ),
        Case(
            "tools/list", encode(envelope("tools/list", {})), headers_for("tools/list"), taken=False
        ),
        Case(
            "oversized body",
            encode(
                envelope("tasks/get", {"taskId": done, "pad": "x" * DEFAULT_MAX_REQUEST_BODY_SIZE})
            ),
            get_headers,
            taken=False,
        ),
        Case(
            "oversized body, chunked",
            encode(
                envelope("tasks/get", {"taskId": done, "pad": "x" * DEFAULT_MAX_REQUEST_BODY_SIZE})
            ),
            get_headers,
            taken=False,
            chunked=True,
        ),
        Case("a small body, chunked", get, get_headers, taken=True, chunked=True),
        Case(
            "Mcp-Method twice", get, get_headers, taken=False, repeated=("mcp-method", "tasks/get")
        ),
        Case(
            "Content-Type twice",
            get,
            get_headers,
            taken=False,
            repeated=("content-type", "application/json"),
        ),
        Case("GET", None, get_headers, taken=False, method="GET"),
        Case("DELETE", None, get_headers, taken=False, method="DELETE"),
        Case("trailing slash", get, get_headers, taken=False, path="/mcp/"),
        Case("another path", get, get_headers, taken=False, path="/other"),
    ]
    if authenticated:
        cases += [
            Case("another principal's task", get, get_headers, taken=True, token="bob"),
            Case(
                "another principal's cancel",
                encode(envelope("tasks/cancel", {"taskId": parked})),
                headers_for("tasks/cancel", parked),
                taken=True,
                token="bob",
            ),
            Case("no token", get, get_headers, taken=False, token=None),
            Case("an unknown token", get, get_headers, taken=False, token="mallory"),
        ]
    return cases


def differential_server(tasks: Tasks, *, authenticated: bool) -> MCPServer[Any]:
    auth: dict[str, Any] = static_auth("alice", "bob") if authenticated else {}
    return build_server(tasks, "differential", **auth)


async def send(
    http: httpx.AsyncClient, base: str, case: Case, body: bytes | None, headers: dict[str, str]
) -> httpx.Response:
    lines = list(headers.items()) + ([case.repeated] if case.repeated else [])
    content: Any = body
    if case.chunked and body is not None:

        async def chunks() -> Any:
            for start in range(0, len(body), 65_536):
                yield body[start : start + 65_536]

        content = chunks()
    return await http.request(case.method, base + case.path, content=content, headers=lines)


def compared(response: httpx.Response, base: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body; the server's own address (its port) read as ``<base>``."""
    headers = [
        (k, "<random>" if k in RANDOM else v.replace(base, "<base>"))
        for k, v in response.headers.multi_items()
        if k not in UNCOMPARED
    ]
    return response.status_code, headers, response.content


@pytest.mark.parametrize(
    ("json_response", "authenticated"),
    [(False, False), (True, False), (False, True)],
    ids=["sse-mode", "json-mode", "authenticated"],
)
async def test_the_fast_path_answers_every_request_as_the_sdk_does(
    json_response: bool, authenticated: bool
) -> None:
    clock = ManualClock(1_800_000_000_000)
    tasks = Tasks(store=MemoryTaskStore(clock=clock), clock=clock)
    mcp = differential_server(tasks, authenticated=authenticated)
    sdk_app = mcp.streamable_http_app(json_response=json_response)
    fast_app = with_fast_path(mcp.streamable_http_app(json_response=json_response))
    if authenticated:  # the fast path sits behind the auth check, in place of the endpoint
        endpoint = next(r.endpoint for r in fast_app.routes if r.path == "/mcp")
        fast = endpoint.app
    else:
        fast = fast_app
    assert isinstance(fast, TasksFastPath)
    assert fast.active
    token = "alice" if authenticated else None
    async with AsyncExitStack() as stack:
        sdk_url = await stack.enter_async_context(running_asgi(sdk_app))
        fast_url = await stack.enter_async_context(running_asgi(fast_app))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
        sdk_client = RawClient(http, sdk_url, token=token)
        fast_client = RawClient(http, fast_url, token=token)
        # Text outside ASCII in the result: the answer escapes it as the SDK's json.dumps does.
        done = await start(sdk_client, "echo", {"text": "hi \u00e9\u2713\U0001f600"}, "completed")
        parked = await start(sdk_client, "ask", {}, "input_required")
        sdk_base, fast_base = sdk_url.removesuffix("/mcp"), fast_url.removesuffix("/mcp")
        cases = corpus(done, parked, json_response=json_response, authenticated=authenticated)
        for case in cases:
            answers = []
            for client, base in ((sdk_client, sdk_base), (fast_client, fast_base)):
                body, headers = case.body, case.headers
                if case.per_path_task:
                    own = await start(client, "ask", {}, "input_required")
                    method = case.extra["method"]
                    body = encode(envelope(method, {"taskId": own, **case.extra["params"]}))
                    headers = headers_for(method, own)
                if authenticated and case.token is not None:
                    headers = {**headers, "authorization": f"Bearer {case.token}"}
                served = fast.served
                answers.append(compared(await send(http, base, case, body, headers), base))
                if base == fast_base:
                    assert fast.served - served == int(case.taken), case.what
            assert answers[0] == answers[1], (case.what, answers)


async def test_a_mounted_app_answers_tasks_on_the_fast_path() -> None:
    """Mounted under a prefix (the lifespan composed as docs/serving-tasks.md shows), the
    fast path still finds its path, answers tasks/get there, and leaves the rest."""
    tasks = Tasks(store=MemoryTaskStore())
    mcp = differential_server(tasks, authenticated=False)
    fast = tasks.http_app(mcp)
    assert isinstance(fast, TasksFastPath)

    @asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        async with tasks.running(), mcp.session_manager.run():
            yield

    outer = Starlette(routes=[Mount("/api", app=fast)], lifespan=lifespan)
    async with running_asgi(outer) as url, httpx.AsyncClient(timeout=10) as http:
        client = RawClient(http, url.replace("/mcp", "/api/mcp"))
        task_id = await start(client, "echo", {"text": "hi"}, "completed")
        polls = fast.served
        assert polls > 0
        got = await client.call("tasks/get", {"taskId": task_id})
        assert got["result"]["status"] == "completed"
        assert fast.served == polls + 1
        listed = await client.call("tools/list", {})
        assert {tool["name"] for tool in listed["result"]["tools"]} == {"ask", "echo"}
        assert fast.served == polls + 1


def test_with_fast_path_takes_the_sdk_endpoint_only() -> None:
    """In front of a bare SDK app; in the endpoint's place when middleware runs first (once,
    however often it is applied); any other app is left as it is."""
    mcp = differential_server(Tasks(store=MemoryTaskStore()), authenticated=False)
    bare = mcp.streamable_http_app()
    fast = with_fast_path(bare)
    assert isinstance(fast, TasksFastPath)
    assert fast.app is bare
    assert with_fast_path(fast) is fast

    guarded = mcp.streamable_http_app()
    guarded.add_middleware(GZipMiddleware)
    assert with_fast_path(guarded) is guarded
    route = next(r for r in guarded.routes if isinstance(r, Route) and r.path == "/mcp")
    assert isinstance(route.app, TasksFastPath)
    assert route.app.active
    assert route.app.app is route.endpoint
    assert with_fast_path(guarded) is guarded
    assert route.app.app is route.endpoint  # not wrapped twice

    other = Starlette(routes=[Route("/mcp", lambda request: None)])
    assert with_fast_path(other) is other
    assert not TasksFastPath(other).active


def test_the_hand_checks_read_what_the_sdk_in_use_checks() -> None:
    """The fast path reads the SDK's classifier and params model by hand only while their
    premises hold for the installed SDK (no ``Mcp-Name`` rung for ``tasks/*``; a params
    model of ``_meta`` alone, whose one declared key is ``progressToken``); else every
    request goes to them, answered the same but slower. This SDK keeps both premises."""
    assert fast_path._NO_NAME_RUNG
    assert fast_path._PARAMS_MODEL_READS

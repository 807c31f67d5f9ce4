"""A shorter path for ``tasks/*`` polls through the SDK's Streamable HTTP app.

Clients spend most of their requests on ``tasks/get``, and on the SDK's path almost all of
the time of one goes to the machinery around our handler: the body-limit middleware, the
session manager, the request ladder, a connection, a context, a middleware chain, a task
group. :class:`TasksFastPath` answers a ``tasks/*`` request itself only when it can show
that the SDK would dispatch it to our handler and nothing else would act on it: a ``POST``
to the MCP path, every header the SDK checks present and valid, a body within its limit
that is one JSON-RPC request whose envelope passes the SDK's own classifier, at the
2026-07-28 protocol, on a server whose middleware chain does nothing to ``tasks/*``. Then it
calls the engine as the SDK's handler does and writes the bytes the SDK writes. Any request
it cannot prove simple goes to the SDK untouched (its body replayed), so every refusal,
error and edge case is the SDK's own answer by construction; the tests compare the two
paths byte for byte.

It sits in front of the SDK's whole app when nothing else is there; with authentication or
Starlette middleware it takes the SDK endpoint's place behind them (:func:`with_fast_path`),
so the token check, the scopes and the principal (the task's owner) are the SDK's.

One difference is deliberate: the SDK's SSE mode commits to an event stream when a handler
is still running after 15 s, and cancels it when the client goes away. ``tasks/*`` handlers
are single store calls; on this path one that takes longer is answered as JSON when it ends.
"""

from __future__ import annotations

import functools
import json
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

# The SDK's default span middleware, exported from no public module: if an upgrade moves
# it, this import fails loudly instead of the fast path stepping aside without a word
# (a seam listed in docs/architecture.md, "Status notifications: the SDK seam").
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    InboundLadderRejection,
    classify_inbound_request,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    JSONRPCError,
    RequestId,
    RequestParamsMeta,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.routing import Match, Route

from mcp_tasks.adapters.listen_middleware import TaskListenMiddleware
from mcp_tasks.adapters.tasks_methods import TaskMethodParams, request_view
from mcp_tasks.engine import TASK_METHODS
from mcp_tasks.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from mcp_tasks.engine import RequestView, TaskEngine

#: Server middleware known to pass ``tasks/*`` through untouched (the SDK's span
#: middleware acts on nothing: the fast path makes the same span, :func:`_in_sdk_spans`).
_PASS_THROUGH_MIDDLEWARE: Final = (OpenTelemetryMiddleware, RequestStateBoundary)

_ROUTING_HEADERS: Final = frozenset(
    {MCP_PROTOCOL_VERSION_HEADER.encode(), MCP_METHOD_HEADER.encode(), MCP_NAME_HEADER.encode()}
)
_WATCHED_HEADERS: Final = _ROUTING_HEADERS | {
    b"content-type",
    b"content-length",
    b"accept",
    b"host",
    b"origin",
}
#: How many verdicts on paths and on headers a fast path keeps: a client repeats the same
#: few values, and the bound keeps one that varies them from growing the tables.
_REMEMBERED: Final = 64
_JSON_HEADERS: Final = b"application/json"
#: The types of a JSON-RPC request's ``id`` the SDK's envelope model accepts, as parsed.
_REQUEST_ID_TYPES: Final = (int, str)
_VERSION_HEADER: Final = MCP_PROTOCOL_VERSION_HEADER.encode()
_METHOD_HEADER: Final = MCP_METHOD_HEADER.encode()
#: Each ``tasks/*`` method as its ``Mcp-Method`` header carries it.
_METHOD_HEADERS: Final = {method: method.encode() for method in TASK_METHODS}
_TASK_METHOD_HEADERS: Final = frozenset(_METHOD_HEADERS.values())
#: Whether the SDK's classifier has no ``Mcp-Name`` rung for any ``tasks/*`` method (its
#: rungs are then the envelope pair, the two headers and the version): the premise of
#: :func:`_simple_route`, which leaves every request to the classifier without it.
_NO_NAME_RUNG: Final = TASK_METHODS.isdisjoint(NAME_BEARING_METHODS)
#: What the SDK's params model reads, the premise of :func:`_params_pass`'s own check: its
#: one field, ``_meta``, whose one declared key is ``progressToken`` (``str | int``); other
#: keys of either are accepted unread.
_PARAMS_MODEL_READS: Final = set(TaskMethodParams.model_fields) == {"meta"} and set(
    RequestParamsMeta.__annotations__
) == {"progress_token"}
_ABSENT: Final = object()
#: ``json.dumps(..., separators=(",", ":"))``, as the SDK writes an answer, built once.
#: Without the check for cycles (a fifth of the encoding's time): an answer is made of what
#: the store gave back, checked JSON nested at most 64 deep, so the bytes are the same.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), check_circular=False)
#: The C encoder behind ``_ENCODER.encode``, made once here, not on every call (a fifth of
#: its cost for a poll's answer); ``None`` where the C accelerator is missing.
_C_ENCODER: Final = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None,  # no check for cycles
        _ENCODER.default,
        encode_basestring_ascii,  # ensure_ascii, as json.dumps
        _ENCODER.indent,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        _ENCODER.sort_keys,
        _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )
)


K = TypeVar("K")


class TasksFastPath:
    """An ASGI app: ``tasks/*`` requests it can prove simple answered here, all else by ``app``.

    ``app`` is the Starlette app of the SDK's ``streamable_http_app()`` with nothing in front
    of its endpoint (it then also checks the path), or that endpoint itself, wherever it sits
    behind the router and the auth layer (see :func:`with_fast_path`). For any other ``app``
    (``active`` is false) every request goes to it unchanged. ``served`` counts the requests
    answered here.

    ``engine`` is the engine whose extension the app's server serves (``Tasks.http_app``
    passes its own). ``None``, for a caller that serves a server without knowing its Tasks
    (``mcp_tasks.testing.running``): the one engine whose notification middleware is on the
    server's chain, found at the first request that sees one (a lifespan may add it) and
    kept.
    """

    def __init__(self, app: ASGIApp, engine: TaskEngine | None = None) -> None:
        self.app = app
        self.served = 0
        self._stamp: dict[str, Any] | None = None
        self._paths: dict[tuple[str, str], bool] = {}
        self._header_verdicts: dict[tuple[bytes | None, ...], bool] = {}
        self._route: Route | None = None  # None: the router has matched the path already
        self.engine = engine
        self._manager: StreamableHTTPSessionManager | None = None
        if isinstance(app, StreamableHTTPASGIApp):
            self._manager = app.session_manager
        elif (found := _bare_sdk_endpoint(app)) is not None:
            self._route, self._manager = found

    def __repr__(self) -> str:
        return f"TasksFastPath({self.app!r})"

    @property
    def active(self) -> bool:
        """Whether this app may answer any request itself (its shape is one it knows)."""
        return self._manager is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if (
            manager is None
            or scope["type"] != "http"
            or scope["method"] != "POST"
            or not self._on_mcp_path(scope)
        ):
            await self.app(scope, receive, send)
            return
        headers = _watched_headers(scope)
        if headers is not None and _padded(headers):
            scope = _unpadded(scope)
            headers = _watched_headers(scope)
        if (
            headers is None
            # The SDK routes a request only when its Mcp-Method is its body's method: any
            # other is no tasks/* request to answer here, and its body is not read.
            or headers.get(_METHOD_HEADER) not in _TASK_METHOD_HEADERS
            or not self._headers_pass(headers, manager)
        ):
            await self.app(scope, receive, send)
            return
        received: list[Message] = []
        body = await _read_body(receive, received, manager.max_request_body_size)
        if body is None or not await self._try_answer(manager, scope, headers, body, send):
            await self.app(scope, _replaying(received, receive), send)

    def _on_mcp_path(self, scope: Scope) -> bool:
        """Whether the router would send this ``POST`` to the MCP route (always, when the
        router has matched it already)."""
        route = self._route
        if route is None:
            return True
        key = (scope["path"], scope.get("root_path", ""))
        verdict = self._paths.get(key)
        if verdict is None:
            verdict = _remember(self._paths, key, route.matches(scope)[0] is Match.FULL)
        return verdict

    def _headers_pass(
        self, headers: Mapping[bytes, bytes], manager: StreamableHTTPSessionManager
    ) -> bool:
        """:func:`_headers_pass`, its verdict remembered for the headers it depends on (the
        ones it reads, but the declared size, checked each time): a client sends the same
        ones on every poll."""
        declared_size = headers.get(b"content-length")
        if declared_size is not None:
            try:
                if int(declared_size) > manager.max_request_body_size:
                    return False
            except ValueError:
                pass  # the SDK ignores a length it cannot read, and so does this
        get = headers.get
        key = (
            get(_VERSION_HEADER),
            get(b"content-type"),
            get(b"accept"),
            get(b"host"),
            get(b"origin"),
        )
        verdict = self._header_verdicts.get(key)
        if verdict is None:
            verdict = _remember(self._header_verdicts, key, _headers_pass(headers, manager))
        return verdict

    async def _try_answer(
        self,
        manager: StreamableHTTPSessionManager,
        scope: Scope,
        headers: dict[bytes, bytes],
        body: bytes,
        send: Send,
    ) -> bool:
        """Answer the request and return ``True``, or send nothing and return ``False``."""
        try:
            # The SDK parses bytes; text that is not UTF-8 goes to the SDK's path with them.
            decoded = json.loads(body.decode())
        except (ValueError, RecursionError):
            return False
        if not isinstance(decoded, dict):
            return False
        method = decoded.get("method")
        if not isinstance(method, str) or method not in TASK_METHODS:
            return False
        if "id" not in decoded:  # a notification: the SDK acknowledges it
            return False
        if not _valid_envelope(decoded):
            return False
        request_id: RequestId = decoded["id"]
        params: dict[str, Any] | None = decoded.get("params")
        protocol_version = _simple_route(params, method, headers)
        if protocol_version is None:
            protocol_version = _classified(decoded, headers)
            if protocol_version is None:
                return False
        server: Server[Any] = manager.app
        engine = self.engine
        if engine is None:
            engine = self.engine = listening_engine(server)
        if engine is None or not _dispatched_alone(server, method, engine):
            return False
        if not engine.runner.running:
            return False  # before the lifespan ran, the SDK's answer is its own (a 500)
        raw = params or {}
        if not _params_pass(raw):
            return False
        view = request_view(raw.get("_meta"), protocol_version, Headers(scope=scope))
        if view.client_capabilities is None:
            # Capabilities that are not an object (a required object): a malformed request,
            # left to the SDK's path like every other.
            return False

        self.served += 1
        try:
            if tracing():
                result = await _in_sdk_spans(server, engine, decoded, protocol_version, view)
            else:
                # Without a tracer provider the SDK's span is the API's no-op: no context,
                # no closure, no look for its middleware (an isinstance costs microseconds).
                result = await engine.handle_tasks_method(view, method, params)
        except Exception as exc:
            error = JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
            status = ERROR_CODE_HTTP_STATUS.get(error.error.code, 200)
            reply = error.model_dump(mode="json", by_alias=True, exclude_none=True)
        else:
            status = 200
            reply = {"jsonrpc": "2.0", "id": request_id, "result": self._envelope(server, result)}
        await _write(status, reply, send)
        return True

    def _envelope(self, server: Server[Any], result: Mapping[str, Any]) -> dict[str, Any]:
        """The result as the SDK shapes an extension method's: ``resultType`` and the
        server's identity in ``_meta``, each unless the handler set it."""
        stamp = self._stamp
        if stamp is None:
            # The SDK stamps a copy of the same dump on every answer (a server's identity is
            # fixed when it is built); this one is only ever encoded, never changed.
            stamp = self._stamp = server.server_info_stamp
        dumped = dict(result)
        if dumped.get("resultType") is None:
            dumped["resultType"] = "complete"
        meta = dumped.get("_meta")
        if meta is None:
            dumped["_meta"] = {SERVER_INFO_META_KEY: stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
        return dumped


def _bare_sdk_endpoint(app: object) -> tuple[Route, StreamableHTTPSessionManager] | None:
    """The MCP route and session manager of an SDK-built app with nothing in front of its
    endpoint (no middleware, no authentication); ``None`` for any other app."""
    if not isinstance(app, Starlette) or app.user_middleware or app.max_body_size is not None:
        return None
    routes = app.routes
    for index, route in enumerate(routes):
        if not isinstance(route, Route):
            return None  # a Mount could claim the path first
        endpoint = route.endpoint
        if isinstance(endpoint, StreamableHTTPASGIApp) and route.app is endpoint:
            earlier = routes[:index]
            if any(isinstance(r, Route) and r.path_regex.match(route.path) for r in earlier):
                return None  # the router would send the MCP path elsewhere
            return route, endpoint.session_manager
    return None


def _guarded_endpoint(app: object) -> RequireAuthMiddleware | Route | None:
    """What holds the SDK's endpoint in an SDK-built app with middleware or authentication:
    the auth check in front of it, or its route; ``None`` for any other app."""
    if not isinstance(app, Starlette):
        return None
    for route in app.routes:
        if not isinstance(route, Route):
            continue
        endpoint = route.endpoint
        if isinstance(endpoint, RequireAuthMiddleware) and isinstance(
            endpoint.app, StreamableHTTPASGIApp
        ):
            return endpoint
        if isinstance(endpoint, StreamableHTTPASGIApp) and route.app is endpoint:
            return route
    return None


def _watched_headers(scope: Scope) -> dict[bytes, bytes] | None:
    """The headers the SDK reads, or ``None`` when one of them appears twice."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in _WATCHED_HEADERS:
            if name in found:
                return None
            found[name] = value
    return found


#: Optional whitespace, which a field value excludes (RFC 9110 §5.5), and as bytes' ints.
_OWS_BYTES: Final = b" \t"
_OWS: Final = frozenset(_OWS_BYTES)


def _padded(headers: Mapping[bytes, bytes]) -> bool:
    """Whether a watched header's value begins or ends with optional whitespace: h11 takes
    it away, httptools (uvicorn's parser where it is installed) hands it on, and the SDK
    compares the routing headers with the body as they come."""
    for value in headers.values():  # noqa: SIM110 (a loop, not any(): on every request)
        if value and (value[0] in _OWS or value[-1] in _OWS):
            return True
    return False


def _unpadded(scope: Scope) -> Scope:
    """``scope`` with every header's value stripped of optional whitespace, as h11 gives
    it: the SDK's app behind this one then reads the same values whichever parser ran."""
    headers = [(name, value.strip(_OWS_BYTES)) for name, value in scope["headers"]]
    return {**scope, "headers": headers}


def _headers_pass(headers: Mapping[bytes, bytes], manager: StreamableHTTPSessionManager) -> bool:
    """Whether the SDK's header checks (Content-Type, Host, Origin, Accept, a modern
    ``Mcp-Protocol-Version``) all pass, so none of their refusals is due. It reads the
    ``Mcp-Protocol-Version``, ``Content-Type``, ``Accept``, ``Host`` and ``Origin`` only
    (:meth:`TasksFastPath._headers_pass` remembers its verdicts by them)."""
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode())
    if version is None or version.decode("latin-1") not in MODERN_PROTOCOL_VERSIONS:
        return False
    if not headers.get(b"content-type", b"").lower().startswith(_JSON_HEADERS):
        return False
    settings = manager.security_settings
    if settings is not None and settings.enable_dns_rebinding_protection:
        host = headers.get(b"host", b"").decode("latin-1")
        if not host or not _allowed(host, settings.allowed_hosts):
            return False
        origin = headers.get(b"origin", b"").decode("latin-1")
        if origin and not _allowed(origin, settings.allowed_origins):
            return False
    accepted = {
        part.split(";")[0].strip().lower()
        for part in headers.get(b"accept", b"").decode("latin-1").split(",")
    }
    wildcard = "*/*" in accepted
    has_json = wildcard or "application/json" in accepted or "application/*" in accepted
    has_sse = wildcard or "text/event-stream" in accepted or "text/*" in accepted
    return has_json and (manager.json_response or has_sse)


def _remember(verdicts: dict[K, bool], key: K, verdict: bool) -> bool:
    """``verdict``, kept in ``verdicts`` under ``key`` (emptied first when full)."""
    if len(verdicts) >= _REMEMBERED:
        verdicts.clear()
    verdicts[key] = verdict
    return verdict


def _allowed(value: str, allowed: list[str]) -> bool:
    """The SDK's Host/Origin match: exact, or ``base:*`` for any port of ``base``."""
    return value in allowed or any(
        pattern.endswith(":*") and value.startswith(pattern[:-1]) for pattern in allowed
    )


def listening_engine(server: Server[Any]) -> TaskEngine | None:
    """The engine that serves task notifications on ``server`` (its notification middleware
    is on the server's chain), when there is exactly one; else ``None``."""
    engines = [m.engine for m in server.middleware if isinstance(m, TaskListenMiddleware)]
    return engines[0] if len(engines) == 1 else None


def _dispatched_alone(server: Server[Any], method: str, engine: TaskEngine) -> bool:
    """Whether the SDK would hand a ``tasks/*`` request for ``method`` to our handler of
    ``engine``, with nothing else on ``server`` acting on it: the handler is ours, there are
    no cache hints, the chain holds only pass-through middleware and this engine's
    notification middleware (another engine's would make it ambiguous whose handler is
    there). The SDK's span middleware is one of them: the fast path makes its span too
    (:func:`_in_sdk_spans`)."""
    entry = server.get_request_handler(method)
    if entry is None or entry.params_type is not TaskMethodParams or server.cache_hints:
        return False
    ours = 0
    for middleware in server.middleware:
        if isinstance(middleware, TaskListenMiddleware):
            if middleware.engine is not engine:
                return False
            ours += 1
        elif not _passes_through(type(middleware)):
            return False
    return ours == 1


@functools.cache
def _passes_through(kind: type) -> bool:
    """Whether middleware of class ``kind`` is one of :data:`_PASS_THROUGH_MIDDLEWARE`,
    decided once per class: the SDK's middleware classes are typing protocols' subclasses,
    whose ``isinstance`` costs microseconds on every request."""
    return issubclass(kind, _PASS_THROUGH_MIDDLEWARE)


async def _in_sdk_spans(
    server: Server[Any],
    engine: TaskEngine,
    request: dict[str, Any],
    protocol_version: str,
    view: RequestView,
) -> dict[str, Any]:
    """The engine's answer to the request inside the span the SDK's own span middleware on
    ``server`` makes of it on the SDK's path (same name, kind, attributes, parent from
    ``_meta``'s ``traceparent``, error handling: it is the same code). For a server with a
    tracer provider installed: without one that span is the API's no-op.

    The middleware reads only the request's method, params, id, ``_meta`` and protocol
    version from its context; a context without a session is enough for it (the tests
    compare both paths' spans)."""
    method: str = request["method"]
    params = request.get("params")

    async def handle(ctx: ServerRequestContext[Any, Any] | None) -> dict[str, Any]:
        return await engine.handle_tasks_method(view, method, params)

    spans = [m for m in server.middleware if isinstance(m, OpenTelemetryMiddleware)]
    if not spans:
        return await handle(None)
    meta = (params or {}).get("_meta")
    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=cast("Any", None),
        lifespan_context={},
        protocol_version=protocol_version,
        method=method,
        params=params,
        request_id=request["id"],
        meta=cast("RequestParamsMeta", meta) if isinstance(meta, dict) else None,
    )
    call: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]] = handle
    for middleware in reversed(spans):
        call = functools.partial(_through, middleware, call)
    result: dict[str, Any] = await call(ctx)
    return result


async def _through(
    middleware: OpenTelemetryMiddleware,
    call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ctx: ServerRequestContext[Any, Any],
) -> Any:
    return await middleware(ctx, call_next)


def _simple_route(
    params: dict[str, Any] | None, method: str, headers: Mapping[bytes, bytes]
) -> str | None:
    """The protocol version of a request the SDK's classifier routes for certain, read
    without it (its cost is a tenth of a poll's handling); ``None`` when this cannot tell,
    and the classifier decides (:func:`_classified`). Certain means: ``_meta`` an object
    with both envelope keys, its protocol version a string that the
    ``Mcp-Protocol-Version`` header carries and the SDK serves, and ``Mcp-Method`` the
    body's method; ``tasks/*`` has no ``Mcp-Name`` rung (:data:`_NO_NAME_RUNG`). Each of
    these is one of the classifier's rungs passed, so its answer is that route."""
    if params is None or not _NO_NAME_RUNG:
        return None
    meta = params.get("_meta")
    if type(meta) is not dict or CLIENT_CAPABILITIES_META_KEY not in meta:
        return None
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    header = headers.get(_VERSION_HEADER)
    if type(version) is not str or header is None or header.decode("latin-1") != version:
        return None
    if headers.get(_METHOD_HEADER) != _METHOD_HEADERS[method]:
        return None
    return version if version in MODERN_PROTOCOL_VERSIONS else None


def _classified(decoded: dict[str, Any], headers: Mapping[bytes, bytes]) -> str | None:
    """The protocol version the SDK's classifier routes the request at, from its routing
    headers as the SDK reads them; ``None`` when it rejects the request."""
    routing = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in headers.items()
        if name in _ROUTING_HEADERS
    }
    verdict = classify_inbound_request(decoded, headers=routing)
    if isinstance(verdict, InboundLadderRejection):
        return None
    return verdict.protocol_version


def _params_pass(raw: dict[str, Any]) -> bool:
    """Whether the SDK's params model (``TaskMethodParams``) accepts ``raw``. What it reads
    (:data:`_PARAMS_MODEL_READS`) is checked here when that is enough to say yes: ``_meta``
    an object whose ``progressToken``, if any, is a string or an integer. Anything else
    (``true``, ``1.0``, a ``_meta`` that is no object…) is the model's own to judge."""
    if _PARAMS_MODEL_READS:
        meta = raw.get("_meta")
        if type(meta) is dict:
            token = meta.get("progressToken", _ABSENT)
            if token is _ABSENT or type(token) is str or type(token) is int:
                return True
    try:
        TaskMethodParams.model_validate(raw, by_name=False)
    except ValidationError:
        return False
    return True


def _valid_envelope(decoded: dict[str, Any]) -> bool:
    """Whether the SDK's ``JSONRPCRequest`` model accepts ``decoded`` (parsed JSON with a
    string ``method``), checked by hand: the model's validation costs more than the rest
    of a poll's parsing. ``id`` is a strict int (never a bool) or a string."""
    params = decoded.get("params")
    return (
        decoded.get("jsonrpc") == "2.0"
        and type(decoded.get("id")) in _REQUEST_ID_TYPES
        and (params is None or isinstance(params, dict))
    )


async def _read_body(receive: Receive, received: list[Message], limit: int) -> bytes | None:
    """The whole request body, each message kept in ``received`` for a replay; ``None`` when
    it is over ``limit`` or the client left (the SDK answers those)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(received: list[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already taken from it given back first."""
    pending = list(received)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _write(status: int, reply: dict[str, Any], send: Send) -> None:
    """The reply as the SDK writes it: compact JSON (``json.dumps`` of its wire dump)."""
    body = (
        _ENCODER.encode(reply) if _C_ENCODER is None else "".join(_C_ENCODER(reply, 0))
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-length", str(len(body)).encode("latin-1")),
                (b"content-type", _JSON_HEADERS),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def with_fast_path(app: ASGIApp, engine: TaskEngine | None = None) -> ASGIApp:
    """``app`` (the SDK's ``streamable_http_app()``) with ``tasks/*`` of ``engine`` on the
    fast path (``None``: as :class:`TasksFastPath` finds it).

    With nothing in front of its endpoint, ``app`` behind a :class:`TasksFastPath`. With
    authentication or middleware, ``app`` itself, its endpoint swapped in place for one
    behind a :class:`TasksFastPath`: authentication, scopes and every middleware run first,
    as on the SDK's path, and the fast path sees the same principal. Any other app is
    returned unchanged."""
    fast = TasksFastPath(app, engine)
    if fast.active:
        return fast
    holder = _guarded_endpoint(app)
    if holder is not None and not isinstance(holder.app, TasksFastPath):
        holder.app = TasksFastPath(holder.app, engine)
    return app

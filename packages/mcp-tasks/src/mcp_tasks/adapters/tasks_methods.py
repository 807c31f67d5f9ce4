"""What every adapter shares: the ``tasks/*`` params, the engine's view of a request and
the ``tasks/*`` method bindings (the SDK's, FastMCP's and the fast path's door to the engine)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from mcp_types import CLIENT_CAPABILITIES_META_KEY, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from mcp_tasks.adapters.ownership import current_owner
from mcp_tasks.engine import TASK_METHODS, RequestView

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from mcp_tasks.engine import TaskEngine

B = TypeVar("B")


class TaskMethodParams(RequestParams):
    """Params of ``tasks/*`` as the SDK (or FastMCP) validates them: anything goes, so that
    the engine's own gates (capability before params) decide the error, not a schema check."""


def request_view(
    meta: object, protocol_version: str | None, headers: Mapping[str, str] | None
) -> RequestView:
    """The engine's view of one request: ``meta`` is its raw ``params._meta``.

    The client's capabilities are the object this request declares under
    ``_meta["io.modelcontextprotocol/clientCapabilities"]``, and nothing else. On
    2026-07-28, the one revision the extension acts on, capabilities are per request: a
    server MUST NOT infer them from earlier requests (docs/architecture.md, step 1), so
    never the session's or a connection's. A value that is not an object declares nothing.
    The raw ``_meta`` is read, not the SDK's parsed copy, which is ``None`` as a whole when
    any of its fields is malformed.
    """
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    return RequestView(
        protocol_version=protocol_version,
        client_capabilities=declared if isinstance(declared, Mapping) else None,
        owner=current_owner(),
        headers=headers,
    )


def http_headers(request: object) -> Mapping[str, str] | None:
    """The HTTP headers of an SDK request's transport request; ``None`` off HTTP."""
    return request.headers if isinstance(request, Request) else None


def view_of(ctx: ServerRequestContext[Any, Any]) -> RequestView:
    """The engine's view of an SDK request context (FastMCP hands its method handlers one)."""
    params = ctx.params if isinstance(ctx.params, Mapping) else None
    meta = params.get("_meta") if params is not None else None
    return request_view(meta, ctx.protocol_version, http_headers(ctx.request))


def tasks_method_handler(engine: TaskEngine, method: str) -> Any:
    """The handler of ``method`` (a ``tasks/*`` method) for the SDK's and FastMCP's
    method registries: the engine answers with the raw params."""

    async def handle(ctx: ServerRequestContext[Any, Any], params: TaskMethodParams) -> Any:
        raw = ctx.params if isinstance(ctx.params, Mapping) else None
        return await engine.handle_tasks_method(view_of(ctx), method, raw)

    return handle


def tasks_method_bindings(engine: TaskEngine, binding: Callable[..., B]) -> list[B]:
    """Every ``tasks/*`` method of ``engine`` as a ``binding`` (the SDK's or FastMCP's
    ``MethodBinding``, which take the same arguments), served at 2026-07-28 only."""
    return [
        binding(
            method,
            TaskMethodParams,
            tasks_method_handler(engine, method),
            protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
        )
        for method in sorted(TASK_METHODS)
    ]

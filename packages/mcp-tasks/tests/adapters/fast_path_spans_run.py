"""The spans of ``tasks/*`` requests on the SDK's path and on the fast path, under
OpenTelemetry's SDK (its in-memory exporter), for the same requests to the same server.

Run as a script (a tracer provider is set once per process). Prints one JSON object: for
each path, each request's finished spans, each as (name, kind, scope, attributes, status,
parent) with the parent named (``remote`` for the caller's ``traceparent``, else the name of
the parent span, or ``None`` for a root) and whether the span is in the caller's trace; and
each answer (HTTP status, JSON-RPC body); how many requests the fast path answered itself.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2 as httpx
from fast_path_servers import build_server, start
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_tasks import MemoryTaskStore, Tasks
from mcp_tasks.adapters.fast_path import TasksFastPath, with_fast_path
from mcp_tasks.testing import PROTOCOL, WITH_TASKS, RawClient, running_asgi

SPANS = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(SPANS))
trace.set_tracer_provider(_provider)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def described(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    names = {span.context.span_id: span.name for span in spans if span.context is not None}
    out = []
    for span in spans:
        parent = span.parent
        if parent is None:
            named = None
        elif parent.is_remote:
            named = "remote" if f"{parent.span_id:016x}" == PARENT_ID else "another remote"
        else:
            named = names.get(parent.span_id, "outside")
        assert span.context is not None
        out.append(
            {
                "name": span.name,
                "kind": str(span.kind),
                "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
                "attributes": dict(span.attributes or {}),
                "status": [str(span.status.status_code), span.status.description],
                "parent": named,
                "in_callers_trace": f"{span.context.trace_id:032x}" == TRACE_ID,
            }
        )
    return sorted(out, key=lambda span: span["name"])


async def send(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]) -> list[Any]:
    """Send one request; its HTTP status and JSON-RPC answer."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
    }
    traced = params.pop("traced", False)
    if traced:
        meta["traceparent"] = TRACEPARENT
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
        "mcp-name": str(params["taskId"]),
    }
    response = await http.post(url, content=json.dumps(body), headers=headers)
    return [response.status_code, response.json()]


async def main() -> None:
    tasks = Tasks(store=MemoryTaskStore())
    mcp = build_server(tasks, "spans")
    sdk_app = mcp.streamable_http_app()
    fast_app = with_fast_path(mcp.streamable_http_app())
    assert isinstance(fast_app, TasksFastPath)
    report: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(tasks.running())
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
        urls = {
            "sdk": await stack.enter_async_context(running_asgi(sdk_app)),
            "fast": await stack.enter_async_context(running_asgi(fast_app)),
        }
        done = await start(RawClient(http, urls["sdk"]), "echo", {"text": "hi"}, "completed")
        requests = [
            ("tasks/get", {"taskId": done, "traced": True}),
            ("tasks/get", {"taskId": done}),
            ("tasks/get", {"taskId": "no-such-task", "traced": True}),
            ("tasks/cancel", {"taskId": done, "traced": True}),
        ]
        for path, url in urls.items():
            report[path] = []
            for method, params in requests:
                SPANS.clear()
                answer = await send(http, url, method, dict(params))
                spans = described(SPANS.get_finished_spans())
                report[path].append({"answer": answer, "spans": spans})
    report["served"] = fast_app.served
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)

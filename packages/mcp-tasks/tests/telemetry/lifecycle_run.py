"""A full task lifecycle under OpenTelemetry's SDK, its in-memory exporters collecting everything.

Run as a script (a tracer provider is set once per process, so the tests run this in a
process of its own); prints one JSON object: every finished span, the metric points, every
log record exported, each as the SDK renders it (``to_json``), and the secrets of the run
(both task ids, the owner's token, an argument, an answer, a result) for the leak scan.

The lifecycle: an authenticated client calls ``build`` as a task; the body reports
progress, asks one question (an input round), and completes with a result once answered.
A second task (``forever``) is cancelled; a third call meets the store's row cap (two rows),
and a read of a closed store fails (a store error).
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import anyio
import httpx2 as httpx
from mcp.server.mcpserver import MCPServer
from opentelemetry import metrics, trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_tasks import (
    MemoryTaskStore,
    StoreOptions,
    StoreUnavailable,
    TaskContext,
    TaskControl,
    Tasks,
)
from mcp_tasks.testing import RawClient, running_asgi, static_auth

SPANS = InMemorySpanExporter()
_tracing = TracerProvider()
_tracing.add_span_processor(SimpleSpanProcessor(SPANS))
trace.set_tracer_provider(_tracing)
READER = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
LOGS = InMemoryLogRecordExporter()
_logging = LoggerProvider()
_logging.add_log_record_processor(SimpleLogRecordProcessor(LOGS))
set_logger_provider(_logging)
# Every record mcp-tasks logs at INFO or above is exported (DEBUG may name redacted ids).
_ours = logging.getLogger("mcp_tasks")
_ours.setLevel(logging.INFO)
_ours.addHandler(LoggingHandler(level=logging.INFO, logger_provider=_logging))

OWNER = "owner-" + secrets.token_hex(8)
ARGUMENT = "argument-" + secrets.token_hex(8)
ANSWER = "answer-" + secrets.token_hex(8)
RESULT = "result-" + secrets.token_hex(8)


def server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "traced", extensions=[tasks.extension()], lifespan=tasks.lifespan, **static_auth(OWNER)
    )
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def build(ref: str, ctx: TaskContext) -> str:
        await ctx.progress(1, 2, "compiling")
        answer = await ctx.elicit("confirm", "Deploy?", schema)
        return f"{RESULT} {ref} {answer['content']['note']}"  # type: ignore[index,call-overload]

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def forever() -> str:
        await anyio.sleep_forever()
        return "unreachable"

    return mcp


async def wait_for(client: RawClient, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            got: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if got["status"] == status:
                return got
            await anyio.sleep(0.02)


async def lifecycle() -> list[str]:
    tasks = Tasks(store=MemoryTaskStore(StoreOptions(max_rows=2)))
    app = tasks.http_app(server(tasks))
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=30) as http:
        client = RawClient(http, url, token=OWNER)
        called = await client.call("tools/call", {"name": "build", "arguments": {"ref": ARGUMENT}})
        task_id = called["result"]["taskId"]
        await wait_for(client, task_id, "input_required")
        answers = {"confirm": {"action": "accept", "content": {"note": ANSWER}}}
        await client.call("tasks/update", {"taskId": task_id, "inputResponses": answers})
        done = await wait_for(client, task_id, "completed")
        assert RESULT in json.dumps(done["result"])
        cancelled = await client.call("tools/call", {"name": "forever", "arguments": {}})
        other_id = cancelled["result"]["taskId"]
        await client.call("tasks/cancel", {"taskId": other_id})
        await wait_for(client, other_id, "cancelled")
        refused = await client.call("tools/call", {"name": "forever", "arguments": {}})
        assert "error" in refused, refused
        await anyio.sleep(0.2)  # the cancelled body's run ends (its span, its duration)
    closed = MemoryTaskStore()
    await closed.close()
    try:
        await TaskControl(closed, notifier=None).status(task_id)
    except StoreUnavailable:
        pass
    else:
        raise AssertionError("a closed store answered")
    return [task_id, other_id]


def main() -> None:
    task_ids = anyio.run(lifecycle)
    _tracing.force_flush()
    print(
        json.dumps(
            {
                "spans": [json.loads(span.to_json()) for span in SPANS.get_finished_spans()],
                "metrics": json.loads(READER.get_metrics_data().to_json()),  # type: ignore[union-attr]
                "logs": [json.loads(record.to_json()) for record in LOGS.get_finished_logs()],
                "secrets": {
                    "task ids": task_ids,
                    "owner": OWNER,
                    "argument": ARGUMENT,
                    "answer": ANSWER,
                    "result": RESULT,
                },
            }
        )
    )


if __name__ == "__main__":
    main()

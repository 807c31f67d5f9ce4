"""With a tracer provider installed the fast path still answers ``tasks/*``, and makes the
spans the SDK's path makes: the SDK's own ``tasks/get`` server span (its middleware's code,
so the same name, kind, attributes, status and parent from ``_meta``'s ``traceparent``) with
``mcp_tasks.get`` and the store's span under it. Compared request by request, under the
SDK's in-memory exporter, in a process of its own (``fast_path_spans_run.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_a_traced_server_answers_tasks_requests_on_the_fast_path_with_the_sdks_spans() -> None:
    """Each request (a traced and an untraced tasks/get, a tasks/get of an unknown task, a
    refused tasks/cancel) has the same spans on both paths; the traced ones continue the
    caller's trace under the SDK's span; the answers are the same; the fast path answered
    every one itself."""
    done = subprocess.run(
        [sys.executable, str(HERE / "fast_path_spans_run.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=HERE,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["served"] == 4
    assert report["fast"] == report["sdk"]
    traced_get = {span["name"]: span for span in report["sdk"][0]["spans"]}
    assert set(traced_get) == {"tasks/get", "mcp_tasks.get", "mcp_tasks.store.get"}
    server = traced_get["tasks/get"]
    assert server["kind"] == "SpanKind.SERVER"
    assert server["parent"] == "remote"
    assert server["attributes"]["mcp.method.name"] == "tasks/get"
    assert traced_get["mcp_tasks.get"]["parent"] == "tasks/get"
    assert all(span["in_callers_trace"] for span in traced_get.values())
    untraced = {span["name"]: span for span in report["sdk"][1]["spans"]}
    assert untraced["tasks/get"]["parent"] is None
    unknown = {span["name"]: span for span in report["sdk"][2]["spans"]}
    assert unknown["tasks/get"]["status"][0] == "StatusCode.ERROR"
    assert unknown["tasks/get"]["attributes"]["rpc.response.status_code"] == "-32602"

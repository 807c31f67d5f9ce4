"""What a full task lifecycle tells OpenTelemetry (its SDK's in-memory exporters, in a process
of its own: ``lifecycle_run.py``): the spans and the metric points it names, and nowhere a task
id, the owner, an argument, an answer or a result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    """Everything the lifecycle run exported (spans, metric points, log records) and its
    secrets."""
    done = subprocess.run(
        [sys.executable, str(HERE / "lifecycle_run.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def spans_named(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [span for span in report["spans"] if span["name"] == name]


def one_span(report: dict[str, Any], name: str, **attributes: object) -> dict[str, Any]:
    found = [
        span
        for span in spans_named(report, name)
        if all(span["attributes"].get(key) == value for key, value in attributes.items())
    ]
    assert len(found) == 1, (name, attributes, [s["attributes"] for s in spans_named(report, name)])
    return found[0]


def points(report: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    """The data points of ``metric`` (empty when it was never recorded)."""
    for resource in report["metrics"]["resource_metrics"]:
        for scope in resource["scope_metrics"]:
            for found in scope["metrics"]:
                if found["name"] == metric:
                    return list(found["data"]["data_points"])
    return []


def point(report: dict[str, Any], metric: str, **attributes: object) -> dict[str, Any]:
    found = [p for p in points(report, metric) if p["attributes"] == attributes]
    assert len(found) == 1, (metric, attributes, [p["attributes"] for p in points(report, metric)])
    return found[0]


def test_the_creating_call_the_run_and_each_tasks_request_are_spans(
    exported: dict[str, Any],
) -> None:
    """The SDK's ``tools/call`` span holds ``mcp_tasks.create``; the task's run is in that
    trace (a child of the create span) with the tool, attempt, store and outcome; each
    ``tasks/get|update|cancel`` is a span under the SDK's, with the status it saw."""
    call = one_span(exported, "tools/call build")
    create = one_span(exported, "mcp_tasks.create", **{"gen_ai.tool.name": "build"})
    assert create["parent_id"] == call["context"]["span_id"]
    run = one_span(exported, "mcp_tasks.run", **{"gen_ai.tool.name": "build"})
    assert run["parent_id"] == create["context"]["span_id"]
    assert run["context"]["trace_id"] == call["context"]["trace_id"]
    assert run["attributes"] == {
        "gen_ai.tool.name": "build",
        "mcp_tasks.task.attempt": 0,
        "mcp_tasks.store": "memory",
        "mcp_tasks.outcome": "completed",
    }
    waiting = one_span(exported, "mcp_tasks.get", **{"mcp_tasks.task.status": "input_required"})
    assert waiting["attributes"]["gen_ai.tool.name"] == "build"
    assert waiting["attributes"]["mcp.method.name"] == "tasks/get"
    one_span(exported, "mcp_tasks.get", **{"mcp_tasks.task.status": "completed"})
    update = one_span(exported, "mcp_tasks.update")
    assert update["attributes"]["mcp_tasks.task.status"] == "working"
    cancel = one_span(exported, "mcp_tasks.cancel")
    assert cancel["attributes"]["mcp_tasks.task.status"] == "cancelled"
    assert cancel["attributes"]["gen_ai.tool.name"] == "forever"
    stopped = one_span(exported, "mcp_tasks.run", **{"gen_ai.tool.name": "forever"})
    assert stopped["attributes"]["mcp_tasks.outcome"] == "cancelled"


def test_each_store_operation_is_a_client_span_under_its_caller(exported: dict[str, Any]) -> None:
    """Store operations are client spans with ``db.system.name`` and ``db.operation.name``
    (and ``error.type`` when they raised; nothing else), each under the span that made it:
    the create under ``mcp_tasks.create``, the body's progress and input request under its
    run, the answers and the read that checks them under the update; the closed store's
    read (``TaskControl``, outside any request) is a root span marked as an error."""
    by_id = {span["context"]["span_id"]: span for span in exported["spans"]}
    parents: dict[str, set[str]] = {}
    errors: list[tuple[str, str, str | None]] = []
    for span in exported["spans"]:
        name = span["name"]
        if not name.startswith("mcp_tasks.store."):
            continue
        operation = name.removeprefix("mcp_tasks.store.")
        assert span["kind"] == "SpanKind.CLIENT"
        attributes = dict(span["attributes"])
        error = attributes.pop("error.type", None)
        assert attributes == {"db.system.name": "memory", "db.operation.name": operation}
        parent = by_id[span["parent_id"]]["name"] if span["parent_id"] else None
        if error is not None:
            errors.append((operation, error, parent))
            assert (span["status"]["status_code"] == "ERROR") == (error == "StoreUnavailable")
            continue
        parents.setdefault(operation, set()).add(str(parent))
    assert sorted(errors) == [
        ("create", "TaskLimitReached", "mcp_tasks.create"),
        ("get", "StoreUnavailable", None),
    ]
    assert parents["create"] == {"mcp_tasks.create"}
    assert parents["put_status"] == {"mcp_tasks.run"}
    assert parents["update"] == {"mcp_tasks.update"}
    assert parents["cancel"] == {"mcp_tasks.cancel"}
    # tasks/update reads the task to hold each answer to its question, under the update
    assert parents["get"] == {"mcp_tasks.get", "mcp_tasks.run", "mcp_tasks.update"}


def test_the_lifecycle_counts_and_times_what_happened(exported: dict[str, Any]) -> None:
    """Created, completed and cancelled by tool, one input round and its wait, the run's
    duration by outcome, the delay to the first run, store latency by operation, the row
    cap's refusal and the closed store's error."""
    build = {"gen_ai.tool.name": "build"}
    forever = {"gen_ai.tool.name": "forever"}
    assert point(exported, "mcp_tasks.tasks.created", **build)["value"] == 1
    assert point(exported, "mcp_tasks.tasks.created", **forever)["value"] == 1
    assert point(exported, "mcp_tasks.tasks.completed", **build)["value"] == 1
    assert point(exported, "mcp_tasks.tasks.cancelled", **forever)["value"] == 1
    assert points(exported, "mcp_tasks.tasks.failed") == []
    assert point(exported, "mcp_tasks.input.rounds", **build)["value"] == 1
    assert point(exported, "mcp_tasks.input.wait", **build)["count"] == 1
    completed = point(
        exported, "mcp_tasks.run.duration", **build, **{"mcp_tasks.outcome": "completed"}
    )
    assert completed["count"] == 1
    assert point(exported, "mcp_tasks.run.first_delay", **build)["count"] == 1
    for operation in ("create", "get", "put_status", "update", "cancel"):
        latency = point(
            exported,
            "db.client.operation.duration",
            **{"db.system.name": "memory", "db.operation.name": operation},
        )
        assert latency["count"] >= 1
    assert point(exported, "mcp_tasks.tasks.refused", **forever)["value"] == 1
    failed_read = {
        "db.system.name": "memory",
        "db.operation.name": "get",
        "error.type": "StoreUnavailable",
    }
    assert point(exported, "mcp_tasks.store.errors", **failed_read)["value"] == 1
    assert point(exported, "db.client.operation.duration", **failed_read)["count"] == 1


def test_no_task_id_owner_argument_answer_or_result_is_exported(exported: dict[str, Any]) -> None:
    """Every exported span (names, attributes, events, links, resource), metric point and
    log record of the run, scanned for each secret of the run: none is there."""
    secrets = exported["secrets"]
    wanted = [*secrets["task ids"], secrets["owner"], secrets["argument"]]
    wanted += [secrets["answer"], secrets["result"]]
    assert exported["spans"]
    assert exported["logs"]
    for kind in ("spans", "metrics", "logs"):
        text = json.dumps(exported[kind])
        leaked = [secret for secret in wanted if secret in text]
        assert leaked == [], f"{kind} carry {leaked}"

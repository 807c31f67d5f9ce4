"""The manual-mode example: the server defers a procrastinate job, procrastinate's own
worker (a SEPARATE process) runs it and drives the task by id through `TaskControl` on a
shared Postgres store.

Each run has its own Postgres schemas, one for the task store and one for procrastinate's
tables, dropped afterwards (the server is the one ``mcp_tasks_postgres.provision`` finds: a
missing one skips locally and fails when ``CI`` is set).
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import psycopg
import pytest
from psycopg import sql

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.testing import running
from mcp_tasks_contract import new_namespace

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.client.session import ClientRequestContext


pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "external_worker"
#: A hung worker fails the test with its log, however slow the machine (runs take 8-50 s).
TIMEOUT_S = 180


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def publish_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="accept", content={"publish": True})


@pytest.fixture
async def example_env(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, str]]:
    """The example's environment on fresh schemas: the task store's (``?schema=``) and
    procrastinate's (created here, its tables applied by the test); both dropped after."""
    namespace = new_namespace()
    jobs_schema = f"{namespace}_jobs"
    env = {
        "MCP_TASKS_STORE_URL": namespaced_url(postgres_url, namespace),
        "JOBS_POSTGRES_URL": postgres_url,
        "JOBS_SCHEMA": jobs_schema,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "worker", raising=False)  # the example's, loaded fresh
    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(jobs_schema))
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(jobs_schema)))
        try:
            yield env
        finally:
            sys.modules.pop("worker", None)
            await admin.execute(drop)
            await drop_namespace(env["MCP_TASKS_STORE_URL"])


async def jobs_in(postgres_url: str, schema: str) -> list[tuple[str, str, dict[str, object]]]:
    """procrastinate's jobs in ``schema``: (task name, status, arguments), oldest first."""
    query = sql.SQL("SELECT task_name, status::text, args FROM {}.procrastinate_jobs ORDER BY id")
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(query.format(sql.Identifier(schema)))
        return [(name, status, args) for name, status, args in await cursor.fetchall()]


async def test_a_procrastinate_worker_drives_deferred_tasks(
    example_env: dict[str, str], postgres_url: str, tmp_path: Path
) -> None:
    """One task is rendered, asks to publish and completes; another is cancelled by the
    client and its job stops on it. procrastinate's worker runs in its own process in
    one-shot mode: it takes the two queued jobs and exits once both have ended."""
    example = runpy.run_path(str(EXAMPLE / "server.py"))
    server, tasks, jobs = example["mcp"], example["tasks"], example["app"]
    async with jobs.open_async():
        await jobs.schema_manager.apply_schema_async()
    log = tmp_path / "worker.log"
    pythonpath = os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "procrastinate", "--app=worker.app", "worker"]
    command += ["--one-shot", "--concurrency=2"]
    worker = None
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with (
                running(server) as url,
                tasks_client(url, elicitation_callback=publish_yes) as c,
            ):
                first = await start_tool(c, "render", {"scene": "teapot", "frames": 2})
                second = await start_tool(c, "render", {"scene": "forest", "frames": 10_000})
                assert isinstance(first, TaskHandle)
                assert isinstance(second, TaskHandle)
                assert first.created is not None
                assert first.created.status_message == "queued for the render farm"
                # Both jobs are queued before the worker starts: one-shot, it runs them and exits.
                with log.open("wb") as sink:
                    worker = await anyio.open_process(
                        command,
                        env={**os.environ, **example_env, "PYTHONPATH": pythonpath},
                        stdout=sink,
                        stderr=sink,
                    )
                seen: list[TaskState] = []

                async def record(state: TaskState) -> None:
                    seen.append(state)

                finished = await first.wait(on_status=record)
                async for state in second.watch():
                    if state.status_message and state.status_message.startswith("rendered frame"):
                        await second.cancel()  # the job is on it: cancel mid-render
                cancelled = await second.get()
                code = await worker.wait()
    except TimeoutError:
        output = log.read_text() if log.exists() else "(the worker had not started)"
        pytest.fail(f"no outcome within {TIMEOUT_S} s; the worker's log:\n{output}")
    finally:
        if worker is not None and worker.returncode is None:
            worker.kill()
            await worker.wait()
        await tasks.store.close()
    output = log.read_text()
    assert finished.status == "completed"
    assert text_of(finished.call_tool_result()) == "rendered teapot (2 frames), published"
    assert any(s.status == "input_required" for s in seen)
    assert cancelled.status == "cancelled"
    assert code == 0, f"the worker ran both jobs to their end and exited:\n{output}"
    queued = await jobs_in(postgres_url, example_env["JOBS_SCHEMA"])
    assert [(name, status) for name, status, _ in queued] == [("render", "succeeded")] * 2
    assert [args for _, _, args in queued] == [
        {"task_id": first.task_id, "scene": "teapot", "frames": 2},
        {"task_id": second.task_id, "scene": "forest", "frames": 10_000},
    ]
    assert output.count("Starting job render") == 2, output  # procrastinate logs each job…
    assert first.task_id not in output  # …but never a task id (a bearer capability)
    assert second.task_id not in output

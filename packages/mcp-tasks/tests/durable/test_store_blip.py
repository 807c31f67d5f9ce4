"""A store blip within the lease changes nothing for a running task: the store (Postgres,
Redis, MongoDB) sits behind a TCP proxy the test closes for 5 s (every connection dropped,
new ones refused) and opens again, while bodies run. A body reporting progress keeps
running, runs once and completes; an input round keeps its answer; an outcome reached
while the store is away is written when it is back; a ``recovery="fail"`` tool is not
failed; and the log says the outage in a few lines without a traceback.

SQLite is not here: it is a file this process opens, with no connection to cut. Its outage
is another process holding the file's write lock, which fails the same calls with the same
``StoreUnavailable`` the runner rides out here (``test_store_outage.py`` locks a file under
load); and since it stops every writer on the file alike, an answer could not be given
meanwhile.
"""

from __future__ import annotations

import logging
import secrets
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import pytest

from mcp_tasks import ANY_OWNER, Complete, NewTask, RunnerOptions, Tasks, TaskStatus, drop_namespace
from mcp_tasks.runtime.notifier import publisher_for
from mcp_tasks.runtime.runner import tool_work
from mcp_tasks.stores.opening import (
    describe_store,
    namespaced_url,
    store_from_url,
    with_query,
)
from mcp_tasks.stores.provisioning import provisioner_for
from mcp_tasks_contract.proxy import StoppableProxy
from mcp_tasks_contract.proxy import through as through_proxy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.domain.models import StatusChange
    from mcp_tasks.runtime.context import RunningTaskContext
    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

BACKENDS = ["postgres", "redis", "mongodb"]
#: How long the store stays away: well within the lease (the default 30 s).
BLIP_S = 5.0
#: Generous: only there so that a broken build fails instead of hanging. Below the lease,
#: so that a body that lost its run is not mistaken for one that ran once.
DEADLINE_S = 25.0
#: The store's bound on the MongoDB store through the proxy (``?timeout_ms=``).
MONGODB_BOUND_MS = 5_000
TICK_S = 0.5
ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "go on?", "requestedSchema": {}},
}


def through(url: str, proxy: StoppableProxy) -> str:
    """``url`` by way of ``proxy``; on MongoDB under the product's bound on the slow
    embedded server (``?timeout_ms=``): an operation that takes longer is one more failure
    the body rides out."""
    proxied = through_proxy(url, proxy)
    if urlsplit(url).scheme == "mongodb":
        proxied = with_query(proxied, timeout_ms=str(MONGODB_BOUND_MS))
    return proxied


@dataclass
class Blip:
    """A store reached through a proxy (``store``'s URL) and directly (``direct``)."""

    url: str
    direct: Store
    proxy: StoppableProxy

    async def blip(self) -> None:
        """The store goes away for :data:`BLIP_S` and comes back."""
        await self.proxy.stop("refused")
        await anyio.sleep(BLIP_S)
        await self.proxy.resume()


@pytest.fixture(params=BACKENDS)
async def blip(request: pytest.FixtureRequest) -> AsyncIterator[Blip]:
    server = request.getfixturevalue(f"{request.param}_url")
    namespace = "blip_" + secrets.token_hex(6)
    on_server = provisioner_for(urlsplit(server).scheme).test_store_url(server)
    direct = store_from_url(namespaced_url(on_server, namespace))
    try:
        async with StoppableProxy.to(server) as proxy:
            yield Blip(namespaced_url(through(server, proxy), namespace), direct, proxy)
    finally:
        await direct.close()
        await drop_namespace(namespaced_url(server, namespace))


@dataclass
class Runs:
    """What the bodies did: each run's task id, each progress report sent."""

    started: list[str] = field(default_factory=list)
    ticks: int = 0


@asynccontextmanager
async def serving(url: str) -> AsyncIterator[Tasks]:
    """A Tasks handed its store as ``mcp-tasks serve --store`` hands it (``use_store``)."""
    tasks = Tasks()
    tasks.use_store(url)
    async with tasks.running():
        yield tasks


async def start(tasks: Tasks, tool: str, body: Any) -> str:
    task = NewTask(task_id=f"blip-{secrets.token_hex(8)}", work=tool_work(tool, {}))
    await tasks.runner.create_and_run(task, body, tasks.store.create)
    return task.task_id


async def ended(store: Store, task_id: str) -> TaskStatus:
    with anyio.fail_after(DEADLINE_S):
        while not (record := await store.get(task_id, ANY_OWNER)).status.is_terminal:  # noqa: ASYNC110
            await anyio.sleep(0.1)
    return record.status


def ticker(runs: Runs, ticks: int) -> Any:
    """A body that reports progress every :data:`TICK_S` for ``ticks`` ticks."""

    async def body(context: RunningTaskContext) -> StatusChange:
        runs.started.append(context.task_id)
        for i in range(ticks):
            await context.progress(i, ticks, "ticking")
            runs.ticks += 1
            await anyio.sleep(TICK_S)
        return Complete({"content": [{"type": "text", "text": "done"}]})

    return body


async def test_a_body_reporting_progress_rides_out_a_blip(blip: Blip) -> None:
    """Two bodies report progress every 0.5 s while the store is away for 5 s: neither sees
    the outage, each runs once and completes."""
    runs = Runs()
    ticks = int((BLIP_S + 4) / TICK_S)
    async with serving(blip.url) as tasks:
        ids = [await start(tasks, "ticker", ticker(runs, ticks)) for _ in range(2)]
        await anyio.sleep(1.0)
        await blip.blip()
        for task_id in ids:
            assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    assert sorted(runs.started) == sorted(ids), "each body ran once"
    assert runs.ticks == 2 * ticks, "no body was stopped"


async def test_the_latest_report_made_while_the_store_is_away_is_written_when_it_is_back(
    blip: Blip,
) -> None:
    """The body reports three steps while the store is away, then reports nothing more:
    none waits for the store (the first finds it away within the store's bound, which
    PyMongo waits out on a refused server; the others return at once), and once the store
    is back the latest step is the task's status message, with the body still running."""
    reported, finish = anyio.Event(), anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        await reported.wait()
        with anyio.fail_after(MONGODB_BOUND_MS / 1000 + 2.0):  # the first: one bound at most
            await context.progress(1, 3, "step")
        with anyio.fail_after(BLIP_S / 2):  # the store is known away: none waits for it
            for step in (2, 3):
                await context.progress(step, 3, "step")
        await finish.wait()
        return Complete({"content": []})

    async with serving(blip.url) as tasks:
        task_id = await start(tasks, "steps", body)
        await anyio.sleep(0.5)
        await blip.proxy.stop("refused")
        reported.set()
        await anyio.sleep(BLIP_S)
        await blip.proxy.resume()
        with anyio.fail_after(DEADLINE_S):
            while (record := await blip.direct.get(task_id, ANY_OWNER)).status_message != (  # noqa: ASYNC110
                "step (3/3)"
            ):
                await anyio.sleep(0.1)
        assert record.status is TaskStatus.WORKING
        finish.set()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED


async def test_an_outcome_reached_while_the_store_is_away_is_written_when_it_is_back(
    blip: Blip,
) -> None:
    """The body ends while the store is away: its outcome is written once the store is
    back, and the task is not run again."""
    runs = Runs()
    finish = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        runs.started.append(context.task_id)
        await finish.wait()
        return Complete({"content": [{"type": "text", "text": "late"}]})

    async with serving(blip.url) as tasks:
        task_id = await start(tasks, "late", body)
        await anyio.sleep(0.5)
        await blip.proxy.stop("refused")
        finish.set()
        await anyio.sleep(BLIP_S)
        await blip.proxy.resume()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    record = await blip.direct.get(task_id, ANY_OWNER)
    assert record.result == {"content": [{"type": "text", "text": "late"}]}
    assert runs.started == [task_id]


async def test_an_input_round_across_a_blip_keeps_its_answer(blip: Blip) -> None:
    """A body waits for input; the store goes away; the answer is given meanwhile (on a
    connection the blip does not cut); once the store is back the body reads it and
    completes with it, having run once."""
    runs = Runs()

    async def body(context: RunningTaskContext) -> StatusChange:
        runs.started.append(context.task_id)
        answers = await context.request_input({"go": ELICIT})
        return Complete({"structuredContent": {"answer": answers["go"]}, "content": []})

    async with serving(blip.url) as tasks:
        task_id = await start(tasks, "asker", body)
        with anyio.fail_after(DEADLINE_S):
            while (await blip.direct.get(task_id, ANY_OWNER)).status is not (  # noqa: ASYNC110
                TaskStatus.INPUT_REQUIRED
            ):
                await anyio.sleep(0.1)
        await blip.proxy.stop("refused")
        await anyio.sleep(1.0)
        await blip.direct.update(task_id, ANY_OWNER, {"go": {"action": "accept"}})
        await anyio.sleep(BLIP_S - 1.0)
        await blip.proxy.resume()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    record = await blip.direct.get(task_id, ANY_OWNER)
    assert record.result is not None
    assert record.result["structuredContent"] == {"answer": {"action": "accept"}}
    assert runs.started == [task_id]


async def test_an_input_request_made_while_the_store_is_away_is_asked_when_it_is_back(
    blip: Blip,
) -> None:
    """The body asks for input while the store is away: the request is made once the store
    is back, and the answer given then completes the task."""
    runs = Runs()
    ask = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        runs.started.append(context.task_id)
        await ask.wait()
        answers = await context.request_input({"go": ELICIT})
        return Complete({"structuredContent": {"answer": answers["go"]}, "content": []})

    async with serving(blip.url) as tasks:
        task_id = await start(tasks, "asker", body)
        await anyio.sleep(0.5)
        await blip.proxy.stop("refused")
        ask.set()
        await anyio.sleep(BLIP_S)
        await blip.proxy.resume()
        with anyio.fail_after(DEADLINE_S):
            while (await blip.direct.get(task_id, ANY_OWNER)).status is not (  # noqa: ASYNC110
                TaskStatus.INPUT_REQUIRED
            ):
                await anyio.sleep(0.1)
        # Answered by another process, which signals its write as every writer does
        # (the body waits for that signal: the store's relay listens again).
        await blip.direct.update(task_id, ANY_OWNER, {"go": {"action": "decline"}})
        publisher = publisher_for(blip.direct)
        await publisher.publish(task_id)
        await publisher.aclose()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    assert runs.started == [task_id]


async def test_a_tool_that_is_not_rerun_survives_a_blip(blip: Blip) -> None:
    """A ``recovery="fail"`` tool (it must not run twice) reporting progress through a blip
    completes: its run was never interrupted, so it is never failed for one."""
    runs = Runs()
    async with serving(blip.url) as tasks:
        tasks.runner.not_rerun.add("once")
        task_id = await start(tasks, "once", ticker(runs, int((BLIP_S + 3) / TICK_S)))
        await anyio.sleep(1.0)
        await blip.blip()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    assert runs.started == [task_id]


@pytest.mark.parametrize("blip", ["postgres", "redis"], indirect=True)
async def test_a_blip_is_said_in_a_few_lines_without_a_traceback(
    blip: Blip, caplog: pytest.LogCaptureFixture
) -> None:
    """Two progress bodies through a 5 s blip, on a Tasks handed its store as ``serve``
    hands it: at most ten log lines (every logger, INFO and up) from the blip to the
    bodies' end, none with a traceback, and each that names a store names the one in use."""
    caplog.set_level(logging.INFO)
    runs = Runs()
    async with serving(blip.url) as tasks:
        ids = [await start(tasks, "ticker", ticker(runs, int((BLIP_S + 4) / TICK_S))) for _ in "ab"]
        await anyio.sleep(1.0)
        caplog.clear()
        await blip.blip()
        for task_id in ids:
            assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
        name = describe_store(tasks.store)
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    text = "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in lines)
    assert len(lines) <= 10, text
    assert not [r for r in lines if r.exc_info or r.exc_text or "Traceback" in r.getMessage()], text
    naming = [r.getMessage() for r in lines if "the task store " in r.getMessage()]
    assert naming, text
    for line in naming:
        assert f"the task store {name} " in line, line


@pytest.mark.parametrize("blip", ["postgres", "redis"], indirect=True)
async def test_an_outage_longer_than_the_lease_stops_the_body_and_the_task_runs_again(
    blip: Blip, caplog: pytest.LogCaptureFixture
) -> None:
    """With a 3 s lease, a 5 s outage outlasts it: the body is stopped once its lease has
    run out for certain (one WARNING naming the tool), and when the store is back the task
    is taken over and runs again to completion."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    runs = Runs()

    async def body(context: RunningTaskContext) -> StatusChange:
        runs.started.append(context.task_id)
        if len(runs.started) == 1:
            while True:  # until stopped
                await context.progress(runs.ticks, None, "ticking")
                runs.ticks += 1
                await anyio.sleep(TICK_S)
        return Complete({"content": [{"type": "text", "text": "second run"}]})

    tasks = Tasks(runner=RunnerOptions(lease_ms=3_000, heartbeat_ms=1_000, recovery_interval_s=0.2))
    tasks.use_store(blip.url)
    tasks.runner.executors["long"] = body
    async with tasks.running():
        task_id = await start(tasks, "long", body)
        await anyio.sleep(1.0)
        await blip.blip()
        assert await ended(blip.direct, task_id) is TaskStatus.COMPLETED
    assert runs.started == [task_id, task_id], "stopped, then run again"
    lost = [r.getMessage() for r in caplog.records if "lost its lease" in r.getMessage()]
    assert lost == [
        f"a task of tool 'long' lost its lease: the task store {describe_store(tasks.store)} "
        "was away longer than the lease; its body is stopped and the task runs again"
    ]
    record = await blip.direct.get(task_id, ANY_OWNER)
    assert record.result == {"content": [{"type": "text", "text": "second run"}]}

"""A task store that goes down is said in the log once per kind of work, naming the store
and the cause, and said again when it is back: the runner's claims, a running body's
lease renewals and the change relay, against a real Redis behind a TCP proxy the test
stops and starts."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import pytest
from resend_scenarios import DroppingProxy, through

from mcp_tasks import Complete, NewTask, RunnerOptions, StoreOptions, TaskStatus
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.notifier import notifier_for
from mcp_tasks.runtime.runner import Runner, tool_work
from mcp_tasks.stores.opening import describe_store
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.domain.models import StatusChange
    from mcp_tasks.runtime.context import RunningTaskContext

pytestmark = pytest.mark.anyio

#: Generous: only there so that a broken build fails instead of hanging.
DEADLINE_S = 60.0


@pytest.fixture
async def proxy(redis_url: str) -> AsyncIterator[DroppingProxy]:
    parts = urlsplit(redis_url)
    assert parts.hostname is not None
    proxy = DroppingProxy(parts.hostname, parts.port or 6379)  # never armed: it forwards
    await proxy.start()
    yield proxy
    await proxy.close()


def said(caplog: pytest.LogCaptureFixture, start: str, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == level and r.getMessage().startswith(start)
    ]


async def until(caplog: pytest.LogCaptureFixture, start: str, level: int) -> None:
    with anyio.fail_after(DEADLINE_S):  # log records come with no event to wait on
        while not said(caplog, start, level):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_a_store_outage_is_named_once_and_its_end_said(
    redis_url: str, namespace: str, proxy: DroppingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis goes away while a runner and its change relay run: each says once (WARNING)
    that its work failed, naming the store by its URL and the cause; failures go on
    without a line each; once Redis is back each says so (INFO)."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    store = RedisTaskStore(through(redis_url, proxy), StoreOptions(), prefix=namespace)
    name = describe_store(store)
    notifier = notifier_for(store)
    runner = Runner(store, notifier, RunnerOptions(recovery_interval_s=0.05, reap_interval_s=None))
    runner.declared.add("t")  # a runner claims only for the tools it serves (S-CLAIM.4)
    try:
        async with notifier.running(), runner.run():
            await proxy.close()
            await until(caplog, "claiming unheld tasks failed", logging.WARNING)
            await until(caplog, "the change relay failed", logging.WARNING)
            await anyio.sleep(1.5)  # more failed claims (every 0.05 s) and relay retries
            await proxy.start()
            await until(caplog, "claiming unheld tasks works again", logging.INFO)
            await until(caplog, "the change relay works again", logging.INFO)
    finally:
        await store.close()
    for work in ("claiming unheld tasks", "the change relay"):
        (first,) = said(caplog, f"{work} failed", logging.WARNING)
        assert f"the task store {name} is unavailable (" in first
        assert "Error" in first.partition("(")[2], "the cause is named"
        (back,) = said(caplog, f"{work} works again", logging.INFO)
        assert f"the task store {name} is back after " in back
    assert not said(caplog, "claiming unheld tasks failed; will retry", logging.WARNING)
    assert not said(caplog, "the change relay failed (", logging.WARNING)


async def test_a_store_on_a_closed_port_is_named_with_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A runner on a Redis URL nobody listens on says once which store it cannot reach
    and why, however many claims fail."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    store = RedisTaskStore("redis://127.0.0.1:1/0", StoreOptions())
    runner = Runner(
        store, notifier_for(store), RunnerOptions(recovery_interval_s=0.05, reap_interval_s=None)
    )
    runner.declared.add("t")  # a runner claims only for the tools it serves (S-CLAIM.4)
    try:
        async with runner.run():
            await until(caplog, "claiming unheld tasks failed", logging.WARNING)
            await anyio.sleep(0.5)
    finally:
        await store.close()
    (line,) = said(caplog, "claiming unheld tasks failed", logging.WARNING)
    assert line.startswith(
        f"claiming unheld tasks failed: the task store {describe_store(store)} is unavailable ("
    )
    assert describe_store(store).startswith("redis://127.0.0.1:1/0")
    assert "Error" in line


async def test_a_running_bodys_lease_renewals_name_the_store_once_and_its_return(
    redis_url: str, namespace: str, proxy: DroppingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis goes away while a body runs: its lease renewals say once (WARNING) which
    store failed and why, retry at most once per heartbeat instead of back to back, and
    say (INFO) when the store is back; the body keeps running throughout."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    store = RedisTaskStore(through(redis_url, proxy), StoreOptions(), prefix=namespace)
    name = describe_store(store)
    heartbeat_s = 0.5
    runner = Runner(
        store,
        notifier_for(store),
        RunnerOptions(
            lease_ms=60_000,
            heartbeat_ms=int(heartbeat_s * 1000),
            recovery_interval_s=None,
            reap_interval_s=None,
        ),
    )
    started, release = anyio.Event(), anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        started.set()
        await release.wait()
        return Complete({"content": []})

    work = "keeping running tasks' leases"
    try:
        async with runner.run():
            task = NewTask(task_id="outage-body", work=tool_work("t", {}))
            await runner.create_and_run(task, body, store.create)
            with anyio.fail_after(DEADLINE_S):
                await started.wait()
            await proxy.close()
            down_at = anyio.current_time()
            await until(caplog, f"{work} failed", logging.WARNING)
            await anyio.sleep(2.0)  # renewals due every heartbeat keep failing
            await proxy.start()
            down_s = anyio.current_time() - down_at
            await until(caplog, f"{work} works again", logging.INFO)
            release.set()
            with anyio.fail_after(DEADLINE_S):  # the body was never stopped: it completes
                while not (await store.get(task.task_id, ANY_OWNER)).status.is_terminal:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            assert (await store.get(task.task_id, ANY_OWNER)).status is TaskStatus.COMPLETED
    finally:
        await store.close()
    (first,) = said(caplog, f"{work} failed", logging.WARNING)
    assert f"the task store {name} is unavailable (" in first
    assert "Error" in first.partition("(")[2], "the cause is named"
    (back,) = said(caplog, f"{work} works again", logging.INFO)
    assert f"the task store {name} is back after " in back
    failures = int(back.partition(" is back after ")[2].split()[0])
    # One renewal per heartbeat and a few signalled checks; back to back it was ~25.
    assert failures <= down_s / heartbeat_s + 3, "retries are paced, not back to back"
    assert not said(caplog, "the task store did not answer", logging.WARNING)

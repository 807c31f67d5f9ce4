"""A Postgres task store nobody answers is named in the log with the cause, once, however
many claims and relay starts fail (the URL's password masked)."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_tasks.runtime.notifier import notifier_for
from mcp_tasks.runtime.runner import Runner
from mcp_tasks_postgres import PostgresTaskStore

pytestmark = pytest.mark.anyio

#: Generous: only there so that a broken build fails instead of hanging.
DEADLINE_S = 60.0
CLOSED = "postgresql://postgres:secret@127.0.0.1:1/x"


def said(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith(start)
    ]


async def test_a_closed_port_is_named_once_with_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Claims and the change relay on a closed port: one WARNING each, naming the store by
    its masked URL and the cause."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    store = PostgresTaskStore(CLOSED)
    notifier = notifier_for(store)
    runner = Runner(store, notifier, recovery_interval_s=0.05, reap_interval_s=None)
    try:
        with anyio.fail_after(DEADLINE_S):
            async with notifier.running(), runner.run():
                # log records come with no event to wait on
                while not (  # noqa: ASYNC110
                    said(caplog, "claiming unheld tasks failed")
                    and said(caplog, "the change relay failed")
                ):
                    await anyio.sleep(0.05)
                await anyio.sleep(1.5)  # more failed claims and relay retries
    finally:
        await store.close()
    for work in ("claiming unheld tasks", "the change relay"):
        (line,) = said(caplog, f"{work} failed")
        assert "the task store postgresql://postgres:***@127.0.0.1:1/x" in line, line
        assert "secret" not in line
        assert "Error" in line.partition(" is unavailable (")[2], "the cause is named"

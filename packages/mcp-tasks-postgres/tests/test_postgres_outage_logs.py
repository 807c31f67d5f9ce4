"""A Postgres task store nobody answers is named in the log with the cause, once, however
many claims and relay starts fail (the URL's password masked); asyncpg's own retries of its
pool's connections print nothing at INFO."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from mcp_tasks import RunnerOptions, TaskNotFound
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
    runner = Runner(store, notifier, RunnerOptions(recovery_interval_s=0.05, reap_interval_s=None))
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


def restore_floor_fails() -> None:
    """What asyncpg's pool logs each time it fails to reconnect its minimum connections
    (``asyncpg.pool.Pool._maintain_min_size``), with the same call."""
    try:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
    except ConnectionRefusedError:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor; retrying", exc_info=True
        )


class Kept(logging.Handler):
    """A handler of every level, as ``mcp-tasks serve``'s is: the loggers' levels decide."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "asyncpg.pool":
            self.records.append(record)


async def test_the_pool_floor_retries_are_printed_only_where_debug_is_wanted(
    open_store: Any,
) -> None:
    """With the store's pool open and the log at INFO (``mcp-tasks serve``'s default),
    asyncpg's floor retries reach no handler; at DEBUG each is one line, its cause
    included, without a traceback."""
    store = await open_store()
    with pytest.raises(TaskNotFound):
        await store.get("missing", None)  # opens the pool
    root, pool_log, kept = logging.getLogger(), logging.getLogger("asyncpg.pool"), Kept()
    levels = root.level, pool_log.level
    root.setLevel(logging.INFO)
    pool_log.setLevel(logging.NOTSET)
    root.addHandler(kept)
    try:
        restore_floor_fails()
        assert kept.records == []
        pool_log.setLevel(logging.DEBUG)
        restore_floor_fails()
    finally:
        root.removeHandler(kept)
        root.setLevel(levels[0])
        pool_log.setLevel(levels[1])
    (record,) = kept.records
    assert record.levelno == logging.DEBUG
    assert record.exc_info is None
    assert record.getMessage() == (
        "Failed to restore the pool connection floor; retrying "
        "(ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 5432))"
    )

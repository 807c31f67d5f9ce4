"""Failure logs keep task ids out, even when a driver error's own text quotes one; a store
outage is said once, then at a bounded rate, then when it ends."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mcp_tasks import StoreUnavailable, new_task_id
from mcp_tasks.domain.ids import redact
from mcp_tasks.runtime.logs import OUTAGE_REPEAT_S, RELAPSE_S, Outage, cause_of, log_failure

if TYPE_CHECKING:
    import pytest


class DriverError(Exception):
    """Stands for a driver exception that quotes its query arguments, as asyncpg's do."""


def test_log_failure_redacts_the_id_in_the_whole_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ERROR record names the failure and the driver error's type, and shows the id only
    redacted, including inside the chained driver error's message."""
    task_id = new_task_id()
    try:
        try:
            raise DriverError(f"invalid input for query argument $1: {task_id!r}")
        except DriverError as driver:
            raise StoreUnavailable from driver
    except StoreUnavailable as error:
        with caplog.at_level(logging.DEBUG):
            log_failure(logging.getLogger("t"), "tasks/get failed", error, task_id)
    [record] = caplog.records
    text = record.getMessage()
    assert record.levelno == logging.ERROR
    assert text.startswith("tasks/get failed\n")
    assert "DriverError" in text
    assert "StoreUnavailable" in text
    assert task_id not in text
    assert redact(task_id) in text


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "outage-test"]


def test_an_outage_is_said_once_then_at_a_bounded_rate_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure every second for four repeat periods: the first is said at once (naming
    the store and the cause), then one line per period carrying how many it stands for,
    and the first success after it says the store is back (INFO)."""
    now = [0.0]
    outage = Outage(
        logging.getLogger("outage-test"),
        "claiming unheld tasks",
        "redis://h:1/0",
        clock=lambda: now[0],
    )
    caplog.set_level(logging.INFO, logger="outage-test")
    periods = 4
    failures = int(OUTAGE_REPEAT_S) * periods + 1
    refused = StoreUnavailable("The store is unavailable")
    refused.__cause__ = ConnectionRefusedError("[Errno 111] Connect call failed")
    for _ in range(failures):
        outage.failed(refused)
        now[0] += 1.0
    outage.recovered()
    lines = _outage_lines(caplog)
    assert lines[0] == (
        logging.WARNING,
        "claiming unheld tasks failed: the task store redis://h:1/0 is unavailable "
        "(ConnectionRefusedError: [Errno 111] Connect call failed); retrying",
    )
    repeats = lines[1:-1]
    assert len(repeats) == periods, repeats
    assert all(level == logging.WARNING for level, _ in repeats)
    assert all(f"{int(OUTAGE_REPEAT_S)} more failures" in text for _, text in repeats)
    assert lines[-1] == (
        logging.INFO,
        f"claiming unheld tasks works again: the task store redis://h:1/0 is back after "
        f"{failures} failures over {failures:.0f} s",
    )


def test_a_relapse_right_after_the_return_is_the_same_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store that fails once more just after it was said to be back (a restarted server's
    stale connections) adds no line; one that fails again for longer than RELAPSE_S is a new
    outage, said and ended as such."""
    now = [0.0]
    outage = Outage(
        logging.getLogger("outage-test"), "creating tasks", "redis://h:1/0", clock=lambda: now[0]
    )
    caplog.set_level(logging.INFO, logger="outage-test")
    refused = StoreUnavailable("The store is unavailable")
    outage.failed(refused)
    now[0] = 3.0
    outage.recovered()
    now[0] = 3.5
    outage.failed(refused)  # the relapse
    now[0] = 3.6
    outage.recovered()
    assert [level for level, _ in _outage_lines(caplog)] == [logging.WARNING, logging.INFO]
    now[0] = 4.0
    outage.failed(refused)  # within RELAPSE_S of the return, but it lasts
    now[0] = 4.0 + RELAPSE_S
    outage.failed(refused)
    now[0] = 20.0
    outage.recovered()
    lines = _outage_lines(caplog)
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO] * 2
    assert lines[2][1].startswith("creating tasks failed: the task store redis://h:1/0")
    assert lines[3][1].startswith("creating tasks works again: the task store redis://h:1/0")


def test_a_success_without_an_outage_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Work that keeps succeeding logs no outage lines at all."""
    outage = Outage(logging.getLogger("outage-test"), "reaping expired tasks", "memory://")
    caplog.set_level(logging.DEBUG, logger="outage-test")
    outage.recovered()
    outage.recovered()
    assert _outage_lines(caplog) == []


def test_the_cause_of_an_outage_masks_anything_shaped_like_a_task_id() -> None:
    """A driver's text quoting a row's id shows it only redacted."""
    task_id = new_task_id()
    error = StoreUnavailable("The store is unavailable")
    error.__cause__ = RuntimeError(f"row {task_id} is locked")
    cause = cause_of(error)
    assert task_id not in cause
    assert cause == f"RuntimeError: row {redact(task_id)} is locked"

"""Failure logs keep task ids out, even when a driver error's own text quotes one."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mcp_tasks import StoreUnavailable, new_task_id
from mcp_tasks.domain.ids import redact
from mcp_tasks.runtime.logs import log_failure

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

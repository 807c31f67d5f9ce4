"""Failure logging that never prints a task id, even from a driver error's own text.

Driver errors may quote query arguments (asyncpg's ``DataError`` does), so a traceback of
a store failure can carry a task id; ids are bearer capabilities (docs/architecture.md,
decision 1).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

from mcp_tasks.domain.ids import redact

if TYPE_CHECKING:
    import logging


def log_failure(logger: logging.Logger, what: str, error: BaseException, task_id: str) -> None:
    """Log ``what`` at ERROR with the error's traceback, ``task_id`` redacted throughout."""
    text = "".join(traceback.format_exception(error)).replace(task_id, redact(task_id))
    logger.error("%s\n%s", what, text.rstrip())

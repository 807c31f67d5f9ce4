"""Failure logging that never prints a task id, even from a driver error's own text, and
says a store outage once, then at a bounded rate, then when it ends.

Driver errors may quote query arguments (asyncpg's ``DataError`` does), so a traceback of
a store failure can carry a task id; ids are bearer capabilities (docs/architecture.md,
decision 1).
"""

from __future__ import annotations

import re
import time
import traceback
from typing import TYPE_CHECKING, Final

from mcp_tasks.domain.ids import redact

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable


def log_failure(logger: logging.Logger, what: str, error: BaseException, task_id: str) -> None:
    """Log ``what`` at ERROR with the error's traceback, ``task_id`` redacted throughout."""
    text = "".join(traceback.format_exception(error)).replace(task_id, redact(task_id))
    logger.error("%s\n%s", what, text.rstrip())


#: After the first line of an outage, how often at most it is said again (with a count).
OUTAGE_REPEAT_S: float = 60.0
#: A failure this soon after the store was said to be back (a server that just restarted:
#: its driver's old connections fail once more) continues the outage instead of starting
#: a new one: no line, and no second "back" line unless it lasts longer.
RELAPSE_S: float = 5.0
#: A minted task id (43 url-safe characters) wherever it appears in a driver's text.
_TASK_ID_LIKE: Final = re.compile(r"[A-Za-z0-9_-]{43}")


def cause_of(error: BaseException) -> str:
    """The innermost cause of ``error`` in one short line (type and text), with anything
    shaped like a task id masked: a driver's text may quote a row."""
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    text = " ".join(str(root).split())[:200]
    text = _TASK_ID_LIKE.sub(lambda m: redact(m.group()), text)
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


class Outage:
    """One recurring failure of background work against a store (``what`` on ``where``):
    the first failure is said at once (WARNING, naming the store and the cause), repeats
    at most every :data:`OUTAGE_REPEAT_S` with how many there were, and the first success
    after it at INFO; a relapse within :data:`RELAPSE_S` of that success is not said again
    unless it lasts that long. Never a task id: callers pass no task's work here."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        where: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.what = what
        self.where = where
        self._clock = clock
        self.failures = 0
        self._unsaid = 0
        self._said_at = 0.0
        self._since = 0.0
        self._back_at: float | None = None
        self._relapse = False

    def failed(self, error: BaseException) -> None:
        """Count a failure; say it when it is the first, or when a repeat is due."""
        now = self._clock()
        self.failures += 1
        if self.failures == 1 and self._back_at is not None and now - self._back_at < RELAPSE_S:
            self._since = self._said_at = now
            self._relapse = True
            return
        if self.failures == 1 or (self._relapse and now - self._since >= RELAPSE_S):
            if self.failures == 1:
                self._since = now
            self._said_at, self._relapse = now, False
            self._logger.warning(
                "%s failed: the task store %s is unavailable (%s); retrying",
                self.what,
                self.where,
                cause_of(error),
                extra={"store_url": self.where},
            )
            return
        self._unsaid += 1
        if now - self._said_at >= OUTAGE_REPEAT_S:
            self._logger.warning(
                "%s still failing: the task store %s is unavailable (%s); "
                "%d more failures in the last %.0f s",
                self.what,
                self.where,
                cause_of(error),
                self._unsaid,
                now - self._said_at,
                extra={"store_url": self.where},
            )
            self._said_at, self._unsaid = now, 0

    def recovered(self) -> None:
        """The work succeeded: after failures, say that the store is back (INFO)."""
        if not self.failures:
            return
        now = self._clock()
        if self._relapse and now - self._since < RELAPSE_S:
            self.failures = self._unsaid = 0
            self._relapse = False
            return
        self._back_at, self._relapse = now, False
        self._logger.info(
            "%s works again: the task store %s is back after %d failures over %.0f s",
            self.what,
            self.where,
            self.failures,
            now - self._since,
            extra={"store_url": self.where},
        )
        self.failures = self._unsaid = 0

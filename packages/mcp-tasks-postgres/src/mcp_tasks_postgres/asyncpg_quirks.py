"""What asyncpg says during an outage that is no news to the store's users: each quirk
turned into a DEBUG line, recognised exactly, everything else left as it is."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)


class _QuietFloorRetries(logging.Filter):
    """While the server is away, asyncpg's pool tries to restore its minimum connections
    every 1 to 60 s, each time with a WARNING and a traceback. The store's users say an
    outage once (``mcp_tasks.runtime.logs.Outage``); these retries go to DEBUG, their cause
    in one line, with no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Failed to restore the pool connection floor"):
            error = record.exc_info[1] if record.exc_info else None
            cause = f" ({type(error).__name__}: {error})" if error is not None else ""
            record.msg, record.args = f"{record.getMessage()}{cause}", None
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.exc_info = record.exc_text = None
            # The logger let it through as a WARNING: now a DEBUG record, it goes on only
            # where DEBUG is wanted (handlers rarely filter by level themselves).
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_QUIET_FLOOR_RETRIES = _QuietFloorRetries()

#: What asyncpg's SSL probe (its ``SSLRequest``, asked first under the default
#: ``sslmode=prefer``) fails with when its connection closes before it was awaited.
_UNREAD_PROBE = "unexpected connection_lost() call"


def quiet_outage_noise(loop: asyncio.AbstractEventLoop) -> None:
    """Quiet asyncpg's outage noise from now on (idempotent): the pool's floor retries on
    its logger, and on ``loop`` the failure of an SSL probe nobody awaited.

    A connect that times out or is cancelled between its TCP connect and its SSL probe
    (the timeout falls there when the TCP connect itself took the whole bound, or the
    caller gives up just then) leaves the probe's future to fail unread when the
    connection closes; asyncio then reports "Future exception was never retrieved", an
    ERROR with a traceback, to the loop's exception handler. The connect has already
    failed (its caller got the timeout), so that report says nothing new: it goes to
    DEBUG. The loop's handler is wrapped, not replaced: every other report goes on to it.
    """
    logging.getLogger("asyncpg.pool").addFilter(_QUIET_FLOOR_RETRIES)
    previous = loop.get_exception_handler()
    if isinstance(previous, _ForgiveUnreadProbe):
        return
    loop.set_exception_handler(_ForgiveUnreadProbe(previous))


class _ForgiveUnreadProbe:
    """A loop exception handler: an unread SSL probe failure of asyncpg's to DEBUG, every
    other report to the handler it wraps (``None``: asyncio's default)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if (
            type(error) is ConnectionError
            and str(error) == _UNREAD_PROBE
            and type(context.get("future")) is asyncio.Future
        ):
            logger.debug("an abandoned connect's SSL probe failed unread (%s)", _UNREAD_PROBE)
            return
        if self.inner is None:
            loop.default_exception_handler(context)
        else:
            self.inner(loop, context)

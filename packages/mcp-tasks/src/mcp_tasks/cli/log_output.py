"""Where `serve`'s and `worker`'s log lines go: one line per record on stderr, at the
level of `--log-level`, set up before the app is imported.

Before the import because the SDK's `MCPServer` and FastMCP set logging up as they are
built: the SDK with `logging.basicConfig` (a no-op once the root logger has our handler),
FastMCP on its own logger, with Rich, which wraps lines at 80 columns when stderr is no
terminal (a log file). Our handler also gives a FastMCP app's process the INFO lines of
mcp-tasks (the store at start-up, tasks resumed), which nothing else would print.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from typing import Any

from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import DefaultFormatter


def configure_logging(level: str) -> None:
    """Log every record at ``level`` and above to stderr, one line each, as uvicorn does."""
    handler = logging.StreamHandler(sys.stderr)
    # uvicorn's own format ("INFO:     …"): our lines and the server's read alike.
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    if not sys.stderr.isatty():
        # FastMCP's documented switch (an app or the environment may still set it).
        os.environ.setdefault("FASTMCP_ENABLE_RICH_LOGGING", "false")
    os.environ.setdefault("FASTMCP_LOG_LEVEL", level.upper())


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's logging, with its access log on stderr beside every other line (its
    default is stdout)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config

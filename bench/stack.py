"""What a bench server really runs on: its event loop and uvicorn's HTTP parser, read inside
the running server as its app starts (never assumed from what is installed or asked for).

Standard library only: fastmcp-tasks' server (its own virtualenv, no import of this project)
imports it too, as a sibling module. Every bench server's lifespan is wrapped by
:func:`reporting`; when ``MCP_TASKS_BENCH_STACK`` names a file, the server writes
``{"loop": …, "http": …}`` there once, at start-up (nothing per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

#: The file a server writes its stack to (set by the bench for each server it starts).
ENV = "MCP_TASKS_BENCH_STACK"

#: uvicorn's HTTP protocol classes by the parser each stands for.
PARSERS = {"H11Protocol": "h11", "HttpToolsProtocol": "httptools"}


def running_stack() -> dict[str, str]:
    """The running loop's class (``asyncio`` or ``uvloop``) and the HTTP protocol of the
    uvicorn ``Config`` this process loaded (``h11`` or ``httptools``; ``?``: none found)."""
    loop = type(asyncio.get_running_loop())
    configs = [
        o
        for o in gc.get_objects()
        if type(o).__name__ == "Config"
        and type(o).__module__ == "uvicorn.config"
        and getattr(o, "loaded", False)
    ]
    protocols = {o.http_protocol_class.__name__ for o in configs}
    http = ",".join(sorted(PARSERS.get(p, p) for p in protocols)) or "?"
    return {"loop": loop.__module__.partition(".")[0], "http": http}


def reporting(
    inner: Callable[[Any], AbstractAsyncContextManager[Any]] | None,
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    """A lifespan (of an MCPServer, a FastMCP or a Starlette app) that writes the running
    stack to ``$MCP_TASKS_BENCH_STACK`` and then enters ``inner`` (if any)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        write(running_stack())
        if inner is None:
            yield None
        else:
            async with inner(app) as state:
                yield state

    return lifespan


def write(found: dict[str, str]) -> None:
    """``found`` to the file ``$MCP_TASKS_BENCH_STACK`` names (none: nowhere)."""
    path = os.environ.get(ENV)
    if path:
        Path(path).write_text(json.dumps(found))


def label(way: str, stack: dict[str, str]) -> str:
    """How a row's server was served: ``uvicorn.run · asyncio loop · h11``."""
    return f"{way} · {stack['loop']} loop · {stack['http']}"

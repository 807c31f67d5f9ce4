"""`mcp-tasks doctor` on a MongoDB store: the server's version, the topology, the
namespace's indexes and the clock skew, as ``(check, level, detail)`` rows (level ``ok``,
``warn`` or ``fail``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mcp_tasks.domain.errors import StoreUnavailable
from mcp_tasks_mongodb.codec import INDEXES, epoch_ms
from mcp_tasks_mongodb.driver import driver_call

if TYPE_CHECKING:
    from collections.abc import Callable

    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks_mongodb.codec import Document

__all__ = ["diagnose"]


async def diagnose(db: Callable[[], AsyncDatabase[Document]], tasks: str) -> list[DiagnosisRow]:
    """Every check, in the order doctor prints them, on the database ``db()`` opens and its
    task collection ``tasks``; an unreachable server (or a closed store) is one ``fail``
    row."""
    try:
        database = db()
        with driver_call():
            sent = time.time()
            hello = await database.client.admin.command("hello")
            received = time.time()
            build = await database.client.admin.command("buildInfo")
            existing = {i["name"] async for i in await database[tasks].list_indexes()}
    except StoreUnavailable as error:
        cause = type(error.__cause__).__name__ if error.__cause__ else "closed"
        return [("mongodb server", "fail", f"not reachable ({cause})")]
    rows: list[DiagnosisRow] = [("mongodb version", "ok", str(build.get("version", "unknown")))]
    if "setName" in hello:
        topology = ("ok", f"replica set {hello['setName']!r}")
    elif hello.get("msg") == "isdbgrid":
        topology = ("ok", "sharded cluster (mongos)")
    else:
        topology = ("ok", "standalone")
    rows.append(("mongodb topology", *topology))
    missing = [name for name in INDEXES if name not in existing]
    if missing:
        detail = f"missing {', '.join(missing)} (run `mcp-tasks migrate`; also made on first use)"
        rows.append(("mongodb indexes", "warn", detail))
    else:
        rows.append(("mongodb indexes", "ok", f"all {len(INDEXES)} present"))
    # The server's clock against ours at the middle of the round trip.
    skew = epoch_ms(hello["localTime"]) - round((sent + received) / 2 * 1000)
    level = "ok" if abs(skew) < 1000 else "warn"
    rows.append(("mongodb clock skew", level, f"{skew:+d} ms (the store uses the server's clock)"))
    return rows

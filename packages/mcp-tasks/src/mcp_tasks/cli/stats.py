"""`mcp-tasks stats --store URL [--json] [--watch SECONDS]`: an operator's counts of a
store's tasks, read-only, from the store's optional ``stats()``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING

import anyio

from mcp_tasks.cli._errors import EXIT_NOT_OFFERED, CLIError
from mcp_tasks.cli._stores import using_store
from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.domain.rules import EXPIRY_HORIZON_MS, UNCLAIMED_AFTER_MS
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.abilities import StatsReader
from mcp_tasks.stores.opening import describe_store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.stores.protocol import Store
    from mcp_tasks.stores.stats import StoreStats

SUMMARY = "count a store's tasks by status, lease, retry, expiry and cap; writes nothing"


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("stats", help=SUMMARY, description=SUMMARY)
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per reading")
    parser.add_argument(
        "--watch",
        type=positive_seconds,
        metavar="SECONDS",
        help="read again every SECONDS (> 0) until Ctrl-C; redrawn in place on a terminal",
    )
    defaults = StoreOptions()
    parser.add_argument(
        "--max-rows",
        type=cap,
        default=defaults.max_rows,
        metavar="N",
        help=f"the row cap the servers open the store with, N ≥ 1 or 'none' "
        f"(default {defaults.max_rows}, StoreOptions' own)",
    )
    parser.add_argument(
        "--max-active-per-owner",
        type=cap,
        default=defaults.max_active_per_owner,
        metavar="N",
        help=f"the per-owner cap the servers open the store with, N ≥ 1 or 'none' "
        f"(default {defaults.max_active_per_owner}, StoreOptions' own)",
    )
    parser.set_defaults(handler=stats)


def cap(text: str) -> int | None:
    """An argparse type: a cap, a whole number of at least 1, or ``none`` (no cap)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'none', got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (or 'none'), got {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def stats(args: argparse.Namespace) -> int:
    """Print the store's stats once, or every ``--watch`` seconds until Ctrl-C (exit 0)."""
    render: Callable[[str, StoreStats], str] = as_json if args.json else as_text
    live = args.watch is not None and not args.json and sys.stdout.isatty()

    async def run() -> int:
        options = StoreOptions(
            max_rows=args.max_rows, max_active_per_owner=args.max_active_per_owner
        )
        async with using_store(args.store, options) as store:
            read = reader(store)
            name = describe_store(store)
            if args.watch is None:
                print(render(name, await read()))
            elif live:
                await redraw(read, name, args.watch)
            else:
                while True:
                    print(render(name, await read()), flush=True)
                    if not args.json:
                        print(flush=True)
                    await anyio.sleep(args.watch)
        return 0

    try:
        return anyio.run(run)
    except KeyboardInterrupt:
        if args.watch is None:
            raise
        return 0  # Ctrl-C is how a watch ends
    except BrokenPipeError:  # the reader left (`| head -1`): done, and nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def reader(store: Store) -> Callable[[], Awaitable[StoreStats]]:
    """The store's ``stats`` method, or the one-line "not offered" error (exit 7)."""
    if not isinstance(store, StatsReader):
        raise CLIError(
            f"the store {describe_store(store)} ({type(store).__name__}) does not offer stats",
            hint="stats is an optional Store method, `async stats() -> StoreStats` "
            "(docs/store-contract.md, 'Required and optional behaviour')",
            code=EXIT_NOT_OFFERED,
        )
    return store.stats


async def redraw(read: Callable[[], Awaitable[StoreStats]], name: str, seconds: float) -> None:
    """Redraw the text in place on the terminal (rich's Live) after each reading."""
    from rich.live import Live  # noqa: PLC0415 - only a watch on a terminal needs rich
    from rich.text import Text  # noqa: PLC0415

    with Live(auto_refresh=False) as display:
        while True:
            display.update(Text(as_text(name, await read())), refresh=True)
            await anyio.sleep(seconds)


def as_json(name: str, figures: StoreStats) -> str:
    """One reading as one line of JSON: counts and epoch-ms times, never an id or owner."""
    return json.dumps(
        {
            "store": name,
            "now": figures.now,
            "rows": figures.rows,
            "live_rows": figures.live_rows,
            "max_rows": figures.max_rows,
            "expired": figures.expired,
            "by_status": {status.value: n for status, n in figures.by_status.items()},
            "active": figures.active,
            "claimed": figures.claimed,
            "unclaimed": figures.unclaimed,
            "lease_lapsed": figures.lease_lapsed,
            "retry_due": figures.retry_due,
            "retry_pending": figures.retry_pending,
            "waiting_unclaimed": figures.waiting_unclaimed,
            "unclaimed_after_ms": UNCLAIMED_AFTER_MS,
            "oldest_working_age_ms": figures.oldest_working_age_ms,
            "expiring_within_ms": EXPIRY_HORIZON_MS,
            "expiring_soon": figures.expiring_soon,
            "owners": figures.owners,
            "busiest_owners": list(figures.busiest_owners),
            "max_active_per_owner": figures.max_active_per_owner,
        }
    )


def as_text(name: str, figures: StoreStats) -> str:
    """One reading as lines a person reads."""
    cap, rows = figures.max_rows, figures.live_rows
    against = "no row cap" if cap is None else f"of the row cap {cap}, {100 * rows // cap} %"
    statuses = ", ".join(f"{status.value} {figures.by_status[status]}" for status in TaskStatus)
    age = figures.oldest_working_age_ms
    owner_cap = figures.max_active_per_owner
    busiest = ", ".join(str(n) for n in figures.busiest_owners) or "none"
    return "\n".join(
        [
            f"store: {name}",
            f"rows: {rows} ({against}); {figures.expired} expired, not reaped yet",
            f"status: {statuses}",
            f"active: {figures.active}: {figures.claimed} claimed under a live lease, "
            f"{figures.unclaimed} unclaimed",
            f"waiting for recovery: {figures.lease_lapsed} with a lapsed lease, "
            f"{figures.retry_due} retries due ({figures.retry_pending} more not due yet)",
            f"claimable, unclaimed for {duration(UNCLAIMED_AFTER_MS)} or more: "
            f"{figures.waiting_unclaimed} (no running process serves their tool, or all are full)",
            "oldest working task: " + ("none" if age is None else f"{duration(age)} old"),
            f"expiring within {duration(EXPIRY_HORIZON_MS)}: {figures.expiring_soon}",
            f"owners with active tasks: {figures.owners}; the busiest have {busiest} "
            + ("(no per-owner cap)" if owner_cap is None else f"(per-owner cap {owner_cap})"),
        ]
    )


def duration(ms: int) -> str:
    """``ms`` as ``2h 3m``, ``4m 5s`` or ``6s`` (``0s`` under a second)."""
    seconds = max(ms, 0) // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"

"""`mcp-tasks migrate | reap | doctor --store URL`: operate a Store without a server."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import anyio

from mcp_tasks.cli._stores import open_store
from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable, TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.models import NewTask
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.stores.protocol import STORE_OPERATIONS

if TYPE_CHECKING:
    import argparse

    from mcp_tasks.stores.protocol import Store

# Capabilities a Store may add beyond the protocol, found by attribute name.
OPTIONAL_CAPABILITIES = {
    "migrate": "creates its schema and indexes (`mcp-tasks migrate`)",
    "notifier": "pushes change notifications to runners and listen streams",
}


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, handler, summary in (
        (
            "migrate",
            migrate,
            "create the store's schema and indexes (no-op for stores without one)",
        ),
        ("reap", reap, "delete expired tasks once and print how many"),
        ("doctor", doctor, "check the store is reachable and print its capabilities"),
    ):
        parser = commands.add_parser(name, help=summary, description=summary)
        parser.add_argument(
            "--store",
            metavar="URL",
            help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
        )
        if name == "reap":
            parser.add_argument(
                "--limit", type=int, default=500, help="delete at most this many (default 500)"
            )
        parser.set_defaults(handler=handler)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def migrate(args: argparse.Namespace) -> int:
    """Call the store's `migrate()` if it has one."""

    async def run() -> int:
        store = open_store(args.store)
        try:
            method = getattr(store, "migrate", None)
            if method is None:
                print(f"{store!r}: nothing to migrate (this store keeps no schema)")
                return 0
            await _maybe_await(method())
            print(f"{store!r}: schema is up to date")
            return 0
        finally:
            await store.close()

    return anyio.run(run)


def reap(args: argparse.Namespace) -> int:
    """Run one `store.reap()` pass."""

    async def run() -> int:
        store = open_store(args.store)
        try:
            removed = await store.reap(limit=args.limit)
        finally:
            await store.close()
        print(f"reaped {removed} expired task{'s' if removed != 1 else ''}")
        return 0

    return anyio.run(run)


async def probe(store: Store) -> list[tuple[str, bool, str]]:
    """Checks as (name, ok, detail) rows: a read, a write round trip, and the capabilities."""
    rows: list[tuple[str, bool, str]] = []
    try:
        await store.get(new_task_id(), ANY_OWNER)
        rows.append(("read", False, "a random id was found?!"))
    except TaskNotFound:
        rows.append(("read", True, "get of an unknown id answers not-found"))
    except StoreUnavailable as error:
        rows.append(("read", False, f"unreachable: {error.__cause__ or error}"))
        return rows
    try:
        # A short-lived probe task: cancelled at once and reaped after its TTL.
        task_id = new_task_id()
        await store.create(NewTask(task_id=task_id, ttl_ms=60_000, status_message="doctor probe"))
        await store.cancel(task_id, ANY_OWNER)
        record = await store.get(task_id, ANY_OWNER)
        rows.append(
            (
                "write",
                record.status.value == "cancelled",
                f"create → cancel → {record.status.value}",
            )
        )
    except MCPTasksError as error:
        rows.append(("write", False, f"{type(error).__name__}: {error.__cause__ or error}"))
    missing = [op for op in STORE_OPERATIONS if not callable(getattr(store, op, None))]
    rows.append(
        (
            "operations",
            not missing,
            "all present" if not missing else f"missing: {', '.join(missing)}",
        )
    )
    for name, meaning in OPTIONAL_CAPABILITIES.items():
        present = getattr(store, name, None) is not None
        rows.append((name, True, ("yes — " if present else "no — ") + meaning))
    return rows


def doctor(args: argparse.Namespace) -> int:
    """Print a connectivity and capability table; exit 1 if a check failed."""

    async def run() -> int:
        store = open_store(args.store)
        try:
            rows = await probe(store)
        finally:
            await store.close()
        print(f"store: {store!r}")
        width = max(len(name) for name, _, _ in rows)
        for name, ok, detail in rows:
            print(f"  {'ok ' if ok else 'FAIL'} {name.ljust(width)}  {detail}")
        return 0 if all(ok for _, ok, _ in rows) else 1

    return anyio.run(run)

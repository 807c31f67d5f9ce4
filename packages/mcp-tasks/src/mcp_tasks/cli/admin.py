"""`mcp-tasks migrate | reap | doctor --store URL`: operate a Store without a server."""

from __future__ import annotations

import argparse
import inspect
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio

from mcp_tasks.cli._errors import store_unreachable
from mcp_tasks.cli._stores import open_store, using_store
from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable, TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.models import NewTask
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.notifier import OffersNotifier
from mcp_tasks.stores.abilities import (
    SCHEMA_MIGRATION,
    Diagnoses,
    Migrates,
    MigrationWords,
    NamesItsMigration,
)
from mcp_tasks.stores.opening import describe_store
from mcp_tasks.stores.protocol import STORE_OPERATIONS

if TYPE_CHECKING:
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks.stores.protocol import Store

# Capabilities a Store may add beyond the protocol, found by attribute name: what the
# store is with it, and without it (a "no" line must not describe the "yes").
#: The typed ability (``mcp_tasks.stores.abilities``) behind each optional capability.
CAPABILITY_ABILITIES: dict[str, type] = {
    "migrate": Migrates,
    "notifier": OffersNotifier,
    "diagnose": Diagnoses,
}

OPTIONAL_CAPABILITIES = {
    "migrate": (
        SCHEMA_MIGRATION.capability,
        "keeps no schema: `mcp-tasks migrate` has nothing to do",
    ),
    "notifier": (
        "wakes runners and listen streams of other processes on a change",
        "a change wakes this process only; other processes find it when they poll",
    ),
    "diagnose": (
        "adds its own checks to doctor (server, durability settings, schema, clock)",
        "no checks of its own beyond the read, the write and the operations",
    ),
}

#: How doctor prints each level (mcp_tasks.stores.doctor_rows.LEVELS); a level it does not
#: know counts as a failure.
SHOWN_LEVELS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, handler, summary in (
        (
            "migrate",
            migrate,
            "create the store's schema and indexes if missing; says whether it created them",
        ),
        ("reap", reap, "delete expired tasks once and print how many"),
        (
            "doctor",
            doctor,
            "check the store: a read, a write of one probe task, its operations; "
            "prints what it checked and what it changed",
        ),
    ):
        parser = commands.add_parser(name, help=summary, description=summary)
        parser.add_argument(
            "--store",
            metavar="URL",
            help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
        )
        if name == "reap":
            parser.add_argument(
                "--limit",
                type=positive_int,
                default=500,
                metavar="N",
                help="delete at most N, N ≥ 1 (default 500)",
            )
        parser.set_defaults(handler=handler)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def migration_words(store: Migrates) -> MigrationWords:
    """What ``store``'s ``migrate()`` makes, in the CLI's words (a schema unless it says)."""
    return store.migration if isinstance(store, NamesItsMigration) else SCHEMA_MIGRATION


def migrate(args: argparse.Namespace) -> int:
    """Call the store's `migrate()` if it has one; say whether it created the schema."""

    async def run() -> int:
        async with using_store(args.store) as store:
            name = describe_store(store)
            if not isinstance(store, Migrates):
                print(f"{name}: nothing to migrate (this store keeps no schema)")
                return 0
            reported = await _maybe_await(store.migrate())
            # The SQL stores say whether they created the schema; a store of a user's may not.
            created = reported if isinstance(reported, bool) else None
            words = migration_words(store)
            if created is None:
                print(f"{name}: schema is current (created if it was missing)")
            else:
                print(f"{name}: {words.done if created else words.current}")
            return 0

    return anyio.run(run)


def reap(args: argparse.Namespace) -> int:
    """Run one `store.reap()` pass."""

    async def run() -> int:
        async with using_store(args.store) as store:
            removed = await store.reap(limit=args.limit)
        print(f"reaped {removed} expired task{'s' if removed != 1 else ''}")
        return 0

    return anyio.run(run)


PROBE_TTL_MS = 60_000


async def probe(store: Store) -> list[DiagnosisRow]:
    """Checks as (name, level, detail) rows: a read, a write round trip, the operations,
    then the store's own ``diagnose()`` rows when it has one and answered the read."""
    rows: list[DiagnosisRow] = []
    try:
        await store.get(new_task_id(), ANY_OWNER)
        rows.append(("read", "fail", "a get of a random id found a task?!"))
    except TaskNotFound:
        rows.append(("read", "ok", "a get of a random id answers not found"))
    except StoreUnavailable as error:
        unreachable = store_unreachable(store, error)
        cause = unreachable.message.rsplit(": ", 1)[-1]
        rows.append(("read", "fail", f"unreachable: {cause}; {unreachable.hint}"))
        return rows
    try:
        # A short-lived probe task: cancelled at once and reaped after its TTL.
        task_id = new_task_id()
        await store.create(
            NewTask(task_id=task_id, ttl_ms=PROBE_TTL_MS, status_message="doctor probe")
        )
        await store.cancel(task_id, ANY_OWNER)
        record = await store.get(task_id, ANY_OWNER)
        rows.append(
            (
                "write",
                "ok" if record.status.value == "cancelled" else "fail",
                f"created a probe task and cancelled it; it reads back {record.status.value}",
            )
        )
    except MCPTasksError as error:
        rows.append(("write", "fail", f"{type(error).__name__}: {error.__cause__ or error}"))
    missing = [op for op in STORE_OPERATIONS if not _defines(store, op)]
    rows.append(
        (
            "operations",
            "fail" if missing else "ok",
            f"all {len(STORE_OPERATIONS)} present"
            if not missing
            else f"missing: {', '.join(missing)}",
        )
    )
    return rows + await diagnosis(store)


def _defines(store: Store, operation: str) -> bool:
    """Whether ``store``'s class (or a base) defines ``operation`` as a method."""
    return any(callable(vars(kind).get(operation)) for kind in type(store).__mro__)


async def diagnosis(store: Store) -> list[DiagnosisRow]:
    """The store's own ``diagnose()`` rows (none without the method). A diagnose that
    raises is one failed row: doctor reports, it does not crash on a store's bug."""
    if not isinstance(store, Diagnoses):
        return []
    try:
        reported = await _maybe_await(store.diagnose())
        return [(str(name), str(level), str(detail)) for name, level, detail in reported]
    except StoreUnavailable as error:
        return [("diagnose", "fail", f"unreachable: {error.__cause__ or error}")]
    except Exception as error:  # a third-party store's bug: reported, not a traceback
        return [("diagnose", "fail", f"raised {type(error).__name__}: {error}")]


def doctor(args: argparse.Namespace) -> int:
    """Print what was checked, the optional capabilities, and what changed; exit 1 if a
    check failed."""

    async def run() -> int:
        store = open_store(args.store)
        created: bool | None = None
        try:
            # Migrate first, on purpose: a SQL store creates its schema on first use anyway,
            # and so the report can say exactly whether this run created it.
            if isinstance(store, Migrates):
                with suppress(StoreUnavailable):  # unreachable: the read row says why
                    reported = await _maybe_await(store.migrate())
                    created = reported if isinstance(reported, bool) else None
            rows = await probe(store)
        finally:
            with suppress(StoreUnavailable):  # a store that never opened: the read row says why
                await store.close()
        print(f"store: {describe_store(store)} ({type(store).__name__})")
        print("checked:")
        width = max(len(name) for name in [*(row[0] for row in rows), *OPTIONAL_CAPABILITIES])
        for name, level, detail in rows:
            print(f"  {SHOWN_LEVELS.get(level, 'FAIL')} {name.ljust(width)}  {detail}")
        print("capabilities:")
        for name, (with_it, without_it) in OPTIONAL_CAPABILITIES.items():
            present = isinstance(store, CAPABILITY_ABILITIES[name])
            if present and isinstance(store, Migrates) and name == "migrate":
                shown = f"yes  {migration_words(store).capability}"
            else:
                shown = f"yes  {with_it}" if present else f"no   {without_it}"
            print(f"  {name.ljust(width)}  {shown}")
        print("changed:")
        wrote = any(name == "write" for name, _, _ in rows)
        if created and isinstance(store, Migrates):
            print(f"  {migration_words(store).done} (as `mcp-tasks migrate` would)")
        elif created is None and isinstance(store, Migrates) and wrote:
            print("  the schema, if it was missing (this store does not say)")
        if wrote:
            print(
                f"  one probe task, cancelled; the reaper deletes it after {PROBE_TTL_MS // 1000} s"
            )
        elif not created:
            print("  nothing")
        return 0 if all(level in ("ok", "warn") for _, level, _ in rows) else 1

    return anyio.run(run)

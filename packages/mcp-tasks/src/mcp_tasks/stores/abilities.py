"""What a store may offer beyond the ten operations, as typed protocols.

The core asks a store what it offers with ``isinstance`` against these runtime-checkable
protocols (an :class:`~mcp_tasks.stores.observed.ObservedStore` is asked through its
``inner`` store): a third-party store offers an ability by having its method, with no base
class and nothing to register. Every ability is optional; a store without one is served as
well, only the tool that needs it says it is missing (``mcp-tasks stats``, ``migrate``,
``doctor``). The cross-process notifier a store may offer is
:class:`~mcp_tasks.runtime.notifier.OffersNotifier` (it names a runtime type).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from mcp_tasks.domain.models import TaskRecord

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks.stores.location import StoreLocation
    from mcp_tasks.stores.stats import StoreCounts, StoreStats

__all__ = [
    "SCHEMA_MIGRATION",
    "Configured",
    "CountsReader",
    "Diagnoses",
    "InFile",
    "Located",
    "Migrates",
    "MigrationWords",
    "NamesItsMigration",
    "Rewrite",
    "Rewrites",
    "StatsReader",
]

Rewrite: TypeAlias = Callable[[TaskRecord], "TaskRecord | None"]
"""What :meth:`Rewrites.rewrite_after` applies to a task as the store holds it: the record to
write in its place, which differs from it only in its payload (its status message, input
requests, answers, asked inputs, result, error and work), or ``None``: leave it."""


@runtime_checkable
class Located(Protocol):
    """A store opened from a URL: it knows where it is (for people: ``location.masked``;
    for telemetry: ``location.scheme``)."""

    @property
    def location(self) -> StoreLocation: ...


@runtime_checkable
class InFile(Protocol):
    """A store kept in one file on this machine (a missing folder is said plainly)."""

    @property
    def path(self) -> Path: ...


@runtime_checkable
class Configured(Protocol):
    """A store that says its options (its bound on waiting bounds the core's own reads)."""

    @property
    def options(self) -> StoreOptions: ...


@runtime_checkable
class StatsReader(Protocol):
    """A store that counts its tasks (``mcp-tasks stats``, the store gauges)."""

    async def stats(self) -> StoreStats:
        """Figures of the whole store; may scan every task."""
        ...


@runtime_checkable
class CountsReader(Protocol):
    """A store that keeps its tasks counted as it writes (the store gauges): rows and
    unexpired tasks per status, the same figures ``stats()`` gives, read without a walk of
    the tasks."""

    async def counts(self) -> StoreCounts:
        """Rows and unexpired tasks per status, exact at the store's now; costs the same
        whatever the number of tasks (no read of a task)."""
        ...


@runtime_checkable
class Migrates(Protocol):
    """A store whose schema can be made ahead of time (``mcp-tasks migrate``)."""

    async def migrate(self) -> bool:
        """Make the schema; whether anything was created (``False``: it was there)."""
        ...


@runtime_checkable
class NamesItsMigration(Protocol):
    """A :class:`Migrates` store whose ``migrate()`` makes something other than a schema,
    and says what, for ``mcp-tasks migrate`` and ``doctor`` (a store without it: "the
    schema")."""

    @property
    def migration(self) -> MigrationWords:
        """What its ``migrate()`` makes, in the CLI's words."""
        ...


@dataclass(frozen=True)
class MigrationWords:
    """How the CLI says what a store's ``migrate()`` did, or makes."""

    #: ``migrate()`` returned True: "created the schema".
    done: str
    #: ``migrate()`` returned False: "schema was already current; nothing changed".
    current: str
    #: doctor's capability line: "has a schema, created by `mcp-tasks migrate` …".
    capability: str


#: What a SQL store's ``migrate()`` makes (the words for a :class:`Migrates` store that
#: does not say).
SCHEMA_MIGRATION = MigrationWords(
    done="created the schema",
    current="schema was already current; nothing changed",
    capability="has a schema, created by `mcp-tasks migrate` (or on first use)",
)


@runtime_checkable
class Diagnoses(Protocol):
    """A store that checks its own backend (``mcp-tasks doctor``)."""

    async def diagnose(self) -> list[DiagnosisRow]:
        """One row per check: (name, ``ok`` | ``warn`` | ``fail``, detail)."""
        ...


@runtime_checkable
class Rewrites(Protocol):
    """A store whose tasks an operator's maintenance rewrites in place, one after the other
    in task id order (``mcp-tasks rekey``): never on a request's path, and nothing it
    answers is an id a caller could use without the store itself."""

    async def rewrite_after(self, after: str | None, rewrite: Rewrite) -> str | None:
        """Rewrite the first task (expired ones included) whose id sorts after ``after``
        (``None``: the first of all): read it, and write ``rewrite(record)`` in its place
        with a compare-and-set, so that a write to the task between the read and the write
        is never lost: the task is then read and rewritten again. Nothing else of the task
        changes (not its revision, times, claim or generation). Returns the task's id, the
        next call's ``after``; ``None`` when no task is left."""
        ...

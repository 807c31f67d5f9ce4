"""How the SQL store talks to a dialect's raw driver: rows, executors, session modes, errors."""

from __future__ import annotations

from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from mcp_tasks_sql.statements import CompiledSQL


class Row(Protocol):
    """A driver's result row, read by column name (``sqlite3.Row``, ``asyncpg.Record``);
    iterating it gives the values in column order."""

    def __getitem__(self, key: str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


class Executor(Protocol):
    """Runs compiled statements on one connection (or pool) of a dialect's raw driver."""

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        """The first row, or ``None``."""
        ...

    async def execute(self, sql: CompiledSQL, values: Mapping[str, Any]) -> int:
        """Run a write; the number of rows it touched."""
        ...


class Mode(Enum):
    """What a session is for; each dialect maps these onto its own locking."""

    READ = "read"  # one statement, no transaction
    MODIFY = "modify"  # read then compare-and-set; the CAS guards it
    TRANSACTION = "transaction"  # several statements that must commit together


@contextmanager
def driver_errors_as_unavailable(errors: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Driver failures surface as :class:`StoreUnavailable` with the driver error as cause."""
    try:
        yield
    except MCPTasksError:
        raise
    except errors as exc:
        raise StoreUnavailable from exc

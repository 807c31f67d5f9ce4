"""How the SQL store talks to a dialect's raw driver: rows, executors, transactions as
generators of statements, session modes. A dialect's driver errors become
:class:`~mcp_tasks.domain.errors.StoreUnavailable` through a
:class:`mcp_tasks.stores.kit.DriverErrors` of its own."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from mcp_tasks_sql.statements import CompiledSQL

__all__ = [
    "Executor",
    "Mode",
    "Row",
    "Statement",
    "Transaction",
    "execute",
    "fetch_one",
    "run_on",
]

R = TypeVar("R")


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


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement a transaction asks its dialect to run: the answer sent back is its
    first row (or ``None``) when ``fetch``, else the number of rows it touched."""

    sql: CompiledSQL
    values: Mapping[str, Any]
    fetch: bool


Transaction: TypeAlias = Generator[Statement, Any, R]
"""A transaction's logic without its I/O: a generator that yields each :class:`Statement`,
is sent the statement's answer, and returns the transaction's result (or raises, which
rolls it back). Written once in :class:`~mcp_tasks_sql.SQLTaskStore`, it runs wherever a
dialect runs statements: awaited one by one (:func:`run_on`), or whole on a driver's own
thread. Bodies use :func:`fetch_one` and :func:`execute` (``yield from``) for typed answers."""


def fetch_one(sql: CompiledSQL, values: Mapping[str, Any]) -> Transaction[Row | None]:
    """``sql``'s first row, or ``None`` (inside a :data:`Transaction`: ``yield from``)."""
    row: Row | None = yield Statement(sql, values, fetch=True)
    return row


def execute(sql: CompiledSQL, values: Mapping[str, Any]) -> Transaction[int]:
    """Run a write; the number of rows it touched (inside a :data:`Transaction`)."""
    touched: int = yield Statement(sql, values, fetch=False)
    return touched


async def run_on(db: Executor, body: Transaction[R]) -> R:
    """Run ``body``'s statements on an async executor, one awaited round trip each."""
    try:
        statement = next(body)
        while True:
            if statement.fetch:
                answer: Any = await db.fetch_one(statement.sql, statement.values)
            else:
                answer = await db.execute(statement.sql, statement.values)
            statement = body.send(answer)
    except StopIteration as done:
        result: R = done.value
        return result
    finally:
        body.close()


class Mode(Enum):
    """What a session is for; each dialect maps these onto its own locking."""

    READ = "read"  # one statement, no transaction
    MODIFY = "modify"  # read then compare-and-set; the CAS guards it
    TRANSACTION = "transaction"  # several statements that must commit together

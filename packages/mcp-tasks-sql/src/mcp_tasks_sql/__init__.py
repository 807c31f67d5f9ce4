"""The SQL layer the SQL stores share: one SQLAlchemy Core table definition, its statements
compiled once per dialect, the row codec, and :class:`SQLTaskStore`, built from a public
:class:`SQLDialect` (``mcp-tasks-sqlite`` and ``mcp-tasks-postgres`` provide one each)."""

from mcp_tasks_sql.codec import RowDecoder, from_row, to_row
from mcp_tasks_sql.connection import (
    Executor,
    Mode,
    Row,
    Statement,
    Transaction,
    execute,
    fetch_one,
    run_on,
)
from mcp_tasks_sql.counts import (
    POSTGRES_SLOTS,
    postgres_triggers,
    read_counts,
    refill_counts,
    sqlite_triggers,
)
from mcp_tasks_sql.schema import (
    ACTIVE,
    ADDED_COLUMNS,
    CLAIMABLE,
    OWNER_TURN_ROWS,
    TERMINAL_STATUSES,
    TaskTables,
    column_upgrades,
    owner_turn_row,
    schema_objects,
    status_in,
    task_tables,
)
from mcp_tasks_sql.schema_check import schema_row
from mcp_tasks_sql.statements import (
    WRITTEN_COLUMNS,
    CompiledSQL,
    Predicates,
    Statements,
    build,
    compile_statement,
    ddl,
    doomed_ids,
    predicates,
    reap_candidates,
    stats,
)
from mcp_tasks_sql.store import SQLDialect, SQLTaskStore, record_of, values_of

# mcp_tasks_sql.testing is left out: it needs Hypothesis and mcp-tasks-contract, test dependencies.
__all__ = [
    "ACTIVE",
    "ADDED_COLUMNS",
    "CLAIMABLE",
    "OWNER_TURN_ROWS",
    "POSTGRES_SLOTS",
    "TERMINAL_STATUSES",
    "WRITTEN_COLUMNS",
    "CompiledSQL",
    "Executor",
    "Mode",
    "Predicates",
    "Row",
    "RowDecoder",
    "SQLDialect",
    "SQLTaskStore",
    "Statement",
    "Statements",
    "TaskTables",
    "Transaction",
    "build",
    "column_upgrades",
    "compile_statement",
    "ddl",
    "doomed_ids",
    "execute",
    "fetch_one",
    "from_row",
    "owner_turn_row",
    "postgres_triggers",
    "predicates",
    "read_counts",
    "reap_candidates",
    "record_of",
    "refill_counts",
    "run_on",
    "schema_objects",
    "schema_row",
    "sqlite_triggers",
    "stats",
    "status_in",
    "task_tables",
    "to_row",
    "values_of",
]

"""The SQL layer the SQL stores share: one SQLAlchemy Core table definition, its statements
compiled once per dialect, the row codec, and :class:`SQLTaskStore`, built from a public
:class:`SQLDialect` (``mcp-tasks-sqlite`` and ``mcp-tasks-postgres`` provide one each)."""

from mcp_tasks_sql.connection import (
    Executor,
    Mode,
    Row,
    Statement,
    Transaction,
    run_on,
)
from mcp_tasks_sql.diagnosis import schema_row
from mcp_tasks_sql.schema import TaskTables, schema_objects, task_tables
from mcp_tasks_sql.statements import CompiledSQL, Predicates, Statements, predicates
from mcp_tasks_sql.store import SQLDialect, SQLTaskStore, record_of, values_of

__all__ = [
    "CompiledSQL",
    "Executor",
    "Mode",
    "Predicates",
    "Row",
    "SQLDialect",
    "SQLTaskStore",
    "Statement",
    "Statements",
    "TaskTables",
    "Transaction",
    "predicates",
    "record_of",
    "run_on",
    "schema_objects",
    "schema_row",
    "task_tables",
    "values_of",
]

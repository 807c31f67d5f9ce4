"""A dialect for another database builds on the shared tables and statements: the column
types it needs, and the statements it spells its own way (examples/mysql_store does)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.exc import UnsupportedCompilationError

from mcp_tasks_sql import CompiledSQL, task_tables
from mcp_tasks_sql.statements import build, ddl

NOW = sa.literal_column("SERVER_NOW", sa.BigInteger)


def spelled(text: str) -> CompiledSQL:
    return CompiledSQL(text, (), {})


def test_a_spelled_statement_replaces_the_shared_one() -> None:
    """Each statement passed by its field name is used as given; the others are the shared
    ones, read_counter stays None unless spelled."""
    tables = task_tables(prefix="ns_")
    insert, read_counter = spelled("INSERT …"), spelled("SELECT n_rows …")
    statements = build(tables, sqlite.dialect(), NOW, insert=insert, read_counter=read_counter)
    assert statements.insert is insert
    assert statements.read_counter is read_counter
    assert statements.cas == build(tables, sqlite.dialect(), NOW).cas
    assert build(tables, sqlite.dialect(), NOW).read_counter is None


def test_a_database_without_on_conflict_compiles_once_it_spells_those_statements() -> None:
    """MySQL has no ON CONFLICT nor UPDATE … RETURNING: the shared spelling of those
    statements does not compile there, and is never compiled when the dialect spells them."""
    tables = task_tables(prefix="ns_")
    with pytest.raises(UnsupportedCompilationError):
        build(tables, mysql.dialect(), NOW)
    own = {"insert", "init_counter", "bump_rows"}
    statements = build(tables, mysql.dialect(), NOW, **{name: spelled(name) for name in own})
    assert {name for name in own if getattr(statements, name).text == name} == own
    assert "FOR UPDATE SKIP LOCKED" in statements.claim_next.text


def test_an_unknown_statement_name_is_refused() -> None:
    with pytest.raises(TypeError, match="no insrt"):
        build(task_tables(), sqlite.dialect(), NOW, insrt=spelled("INSERT …"))


def test_column_types_shape_the_ddl_of_the_string_columns() -> None:
    """A named string column gets the given type in the DDL; other columns cannot."""
    tables = task_tables(
        prefix="ns_", column_types={"task_id": sa.String(255), "payload": mysql.LONGTEXT()}
    )
    text = " ".join(ddl(tables, mysql.dialect()))
    assert "task_id VARCHAR(255) NOT NULL" in text
    assert "payload LONGTEXT NOT NULL" in text
    assert "owner TEXT" in text
    with pytest.raises(ValueError, match="created_at"):
        task_tables(column_types={"created_at": sa.Integer()})

"""The SQL predicates (claimable, reapable, under the caps) select on PostgreSQL exactly
what the rules they re-state accept (mcp_tasks_sql.testing.check_predicates, on a real
server, in a fresh schema).

The predicates run with ``now`` as a bind parameter, not the server clock: see the note on
the clock in :mod:`mcp_tasks_sql.testing` for why that still checks the production SQL.
"""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from mcp_tasks_postgres.store import PostgresDialect
from mcp_tasks_sql import task_tables
from mcp_tasks_sql.testing import check_predicates

pytestmark = pytest.mark.anyio


async def test_sql_predicates_agree_with_the_rules(postgres_url: str) -> None:
    """Every predicate selects exactly the generated records its rule accepts, at the same now."""
    schema = "mcpt_pred_" + secrets.token_hex(6)
    dialect = PostgresDialect(postgres_url, schema=schema, max_connections=2)
    try:
        sql_dialect = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
        await check_predicates(dialect, task_tables(schema=schema), sql_dialect)
    finally:
        try:
            await dialect.drop()
        finally:
            await dialect.close()

"""What the MariaDB / MySQL store adds beside the contract: its URL, its schema and
``migrate``, what ``mcp-tasks doctor`` reports, and ids compared exactly."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import pytest
from conftest import connect

from mcp_tasks import ANY_OWNER, NewTask, TaskNotFound, WorkSpec, drop_namespace, namespaced_url
from mcp_tasks import store_from_url as open_store
from mcp_tasks_mysql import MySQLTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def url(mysql_url: str) -> AsyncIterator[str]:
    """A fresh namespace (table prefix) of the test server, dropped afterwards."""
    namespaced = namespaced_url(mysql_url, f"mysqlt_{secrets.token_hex(5)}")
    try:
        yield namespaced
    finally:
        await drop_namespace(namespaced)


async def test_both_schemes_open_the_store_on_the_url_s_prefix(url: str) -> None:
    """``mysql://`` and ``mariadb://`` open this store, on the URL's table prefix."""
    for scheme in ("mysql", "mariadb"):
        store = open_store(url.replace("mysql", scheme, 1))
        assert isinstance(store, MySQLTaskStore)
        assert store.table_prefix.startswith("mysqlt_")
        await store.close()


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("mysql://root@127.0.0.1:3306/", "names its database"),
        ("mysql://root@127.0.0.1/test?table_prefix=Bad-Prefix", "table_prefix"),
        ("mysql://root@127.0.0.1/test?max_connections=0", "max_connections"),
    ],
)
def test_a_url_it_cannot_read_says_the_expected_form(bad: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        open_store(bad)


async def test_migrate_creates_the_tables_once_and_doctor_reports_them(url: str) -> None:
    """Before migrate the schema row fails; migrate creates the tables (True), a second
    migrate finds them (False); then every doctor row is ok on this machine's server
    (innodb_flush_log_at_trx_commit = 1) and names the server, the durability settings and
    the clock."""
    store = MySQLTaskStore(url)
    try:
        before = {name: level for name, level, _ in await store.diagnose()}
        assert before["schema"] == "fail"
        assert await store.migrate() is True
        assert await store.migrate() is False
        rows = await store.diagnose()
        assert [name for name, _, _ in rows] == ["mysql", "durability", "schema", "clock"]
        assert {level for _, level, _ in rows} == {"ok"}, rows
        details = {name: detail for name, _, detail in rows}
        assert "MariaDB" in details["mysql"] or "MySQL" in details["mysql"]
        assert "innodb_flush_log_at_trx_commit 1" in details["durability"]
        assert "0 tasks" in details["schema"]
    finally:
        await store.close()


async def test_task_ids_are_compared_exactly(url: str) -> None:
    """An id that differs in letter case or by a trailing space names no task (the key
    columns compare bytes, without padding), so no near-miss reads a task."""
    store = open_store(url)
    try:
        record = await store.create(NewTask("AbC-task-id"))
        await store.create(NewTask("abc-task-id"))
        assert (await store.get("AbC-task-id", ANY_OWNER)).task_id == record.task_id
        for near in ("ABC-TASK-ID", "AbC-task-id ", " AbC-task-id"):
            with pytest.raises(TaskNotFound):
                await store.get(near, ANY_OWNER)
    finally:
        await store.close()


async def test_migrate_adds_what_is_missing(url: str) -> None:
    """An index dropped by hand: doctor's schema row names it, and migrate creates just it
    again (False: the task table was there) without touching the tasks."""
    store = MySQLTaskStore(url)
    try:
        record = await store.create(NewTask("kept-task"))
        index = f"{store.table_prefix}tasks_claim_ix"
        with connect(url) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP INDEX {index} ON {store.table_prefix}tasks")
        schema = {name: (level, detail) for name, level, detail in await store.diagnose()}
        assert schema["schema"][0] == "fail"
        assert index in schema["schema"][1]
        assert await store.migrate() is False
        assert {level for _, level, _ in await store.diagnose()} == {"ok"}
        assert await store.get(record.task_id, ANY_OWNER) == record
    finally:
        await store.close()


async def test_migrate_adds_the_work_type_to_an_older_table(url: str) -> None:
    """A task table from before the ``work_type`` column (S-CLAIM.4): migrate adds the
    column and its index and fills it from the payload, so claims for a type find the
    tasks written before."""
    store = MySQLTaskStore(url)
    try:
        alpha = await store.create(NewTask("alpha-task", work=WorkSpec("alpha")))
        beta = await store.create(NewTask("beta-task", work=WorkSpec("beta")))
        table = f"{store.table_prefix}tasks"
        with connect(url) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP INDEX {table}_claim_type_ix ON {table}")
            cursor.execute(f"ALTER TABLE {table} DROP COLUMN work_type")
        assert await store.migrate() is False
        assert {level for _, level, _ in await store.diagnose()} == {"ok"}
        for record in (beta, alpha):
            assert record.work is not None
            types = frozenset({record.work.type})
            claimed = await store.claim("w", lease_ms=30_000, work_types=types)
            assert claimed is not None
            assert claimed.record.task_id == record.task_id
    finally:
        await store.close()

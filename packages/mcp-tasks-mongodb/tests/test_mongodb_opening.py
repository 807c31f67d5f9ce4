"""Opening the MongoDB store: its URLs and namespaces, a repr without the password, a server
that is not there, a namespace that is dropped whole and only it, and the doctor's rows."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import (
    NewTask,
    StoreUnavailable,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks.stores.opening import InvalidStoreURL, with_query
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.proxy import StoppableProxy, through
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.codec import INDEXES

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_store_from_url_finds_the_mongodb_store(mongodb_url: str, namespace: str) -> None:
    """mongodb:// resolves through the entry points; ?prefix= is the collection prefix."""
    url = namespaced_url(mongodb_url, namespace)
    store = store_from_url(url)
    assert isinstance(store, MongoTaskStore)
    assert store.prefix == namespace
    assert store.database == "mcp_tasks"
    assert store_from_url(store.url).url == store.url  # the url opens the namespace again
    try:
        task = await store.create(NewTask(new_task_id()))
        assert (await store.get(task.task_id, None)).task_id == task.task_id
    finally:
        await store.close()
    await drop_namespace(url)


def test_the_namespace_comes_from_the_url() -> None:
    """The URL's path is the database, ?prefix= the collection prefix (defaults mcp_tasks);
    mongodb+srv:// opens without any I/O; other schemes and odd names are refused."""
    store = store_from_url("mongodb://db.example:27017/tenants?prefix=a_1&replicaSet=rs0")
    assert isinstance(store, MongoTaskStore)
    assert (store.database, store.prefix) == ("tenants", "a_1")
    assert "prefix" not in store.connect_url
    assert "replicaSet=rs0" in store.connect_url
    srv = store_from_url("mongodb+srv://cluster0.example.net/")
    assert isinstance(srv, MongoTaskStore)
    assert (srv.database, srv.prefix) == ("mcp_tasks", "mcp_tasks")
    with pytest.raises(InvalidStoreURL, match="prefix"):
        store_from_url("mongodb://127.0.0.1/db?prefix=a.b")
    with pytest.raises(InvalidStoreURL, match="database"):
        store_from_url("mongodb://127.0.0.1/a.b")
    with pytest.raises(ValueError, match="mongodb://"):
        MongoTaskStore("redis://h:6379/0")


def test_repr_masks_the_password(caplog: pytest.LogCaptureFixture) -> None:
    """repr(store) and its url never show the password of its URL, nor do its logs."""
    caplog.set_level(logging.DEBUG)
    url = "mongodb://alice:s3cret@db.example:27017/tasks?prefix=mcp_x&authSource=admin"
    store = store_from_url(url)
    assert isinstance(store, MongoTaskStore)
    assert "s3cret" not in repr(store)
    assert "alice:***@db.example" in repr(store)
    assert "s3cret" not in store.url
    assert "s3cret" not in caplog.text


async def test_unreachable_server_is_store_unavailable() -> None:
    """A server that does not answer surfaces as StoreUnavailable with the driver error as cause."""
    with anyio.fail_after(30):
        # nothing listens on port 1; a short server selection keeps the test short
        store = MongoTaskStore("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500")
        with pytest.raises(StoreUnavailable) as caught:
            await store.get(new_task_id(), None)
        assert caught.value.__cause__ is not None
        rows = await store.diagnose()
        assert rows[0][:2] == ("mongodb server", "fail")
        await store.close()


async def test_drop_removes_one_namespace_only(open_store: OpenStore, mongodb_url: str) -> None:
    """drop_namespace drops its own namespace's collections, never another's (even one whose
    name starts the same)."""
    store = await open_store()
    mine = await store.create(NewTask(new_task_id()))
    other_ns = store.prefix + "_x"
    other = MongoTaskStore(mongodb_url, prefix=other_ns)
    try:
        theirs = await other.create(NewTask(new_task_id()))
        await drop_namespace(namespaced_url(mongodb_url, store.prefix))
        with pytest.raises(TaskNotFound):
            await store.get(mine.task_id, None)
        assert (await other.get(theirs.task_id, None)) == theirs
    finally:
        await other.close()
        await drop_namespace(namespaced_url(mongodb_url, other_ns))
    await drop_namespace(namespaced_url(mongodb_url, new_namespace()))  # missing: fine


async def test_drop_fails_within_the_bound_when_the_server_does_not_answer(
    mongodb_url: str, namespace: str
) -> None:
    """drop_namespace on a server that does not answer (a silent proxy: connections held,
    nothing passed on) raises StoreUnavailable within the store's bound (``?timeout_ms=``),
    not PyMongo's 30 s server selection nor never (a test's teardown drops its namespace)."""
    bound_ms = 2_000
    async with StoppableProxy.to(mongodb_url) as proxy:
        proxied = namespaced_url(through(mongodb_url, proxy), namespace)
        url = with_query(proxied, timeout_ms=str(bound_ms))
        await proxy.stop("silent")
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await drop_namespace(url)
        assert time.monotonic() - started < bound_ms / 1000 + 3.0


async def test_migrate_creates_the_indexes_once(open_store: OpenStore, mongodb_url: str) -> None:
    """migrate() creates every index and the counters (True), then finds them there
    (False); on a server with transactions there is no janitor (reap is the one deleter:
    the counters see it)."""
    store = await open_store()
    assert await store.migrate() is True
    assert await store.migrate() is False
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    try:
        tasks = client[store.database][f"{store.prefix}_tasks"]
        names = {index["name"] async for index in await tasks.list_indexes()}
        totals = await client[store.database][f"{store.prefix}_counts"].find_one("totals")
    finally:
        await client.close()
    assert set(INDEXES) <= names
    assert "janitor" not in names
    assert totals is not None


async def test_diagnose_reports_version_topology_indexes_and_skew(open_store: OpenStore) -> None:
    """The doctor's rows: the server version, the topology, the index state (a warning
    before migrate, ok after) and the clock skew."""
    store = await open_store()
    before = {name: (level, detail) for name, level, detail in await store.diagnose()}
    assert before["mongodb indexes"][0] == "warn"
    assert "mcp-tasks migrate" in before["mongodb indexes"][1]
    await store.migrate()
    rows = {name: (level, detail) for name, level, detail in await store.diagnose()}
    assert set(rows) == {
        "mongodb version",
        "mongodb topology",
        "mongodb indexes",
        "mongodb clock skew",
    }
    assert rows["mongodb version"][0] == "ok"
    assert rows["mongodb version"][1][0].isdigit()
    assert rows["mongodb topology"][1].startswith(("replica set", "standalone", "sharded"))
    assert rows["mongodb indexes"][0] == "ok"
    assert rows["mongodb clock skew"][1].endswith("(the store uses the server's clock)")
    assert all(level in ("ok", "warn", "fail") for level, _ in rows.values())

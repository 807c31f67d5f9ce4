"""Encryption at rest on every store: what the database holds of a task's user data is
ciphertext. Each test writes tasks through ``EncryptedStore`` on a real store, then reads
the store's raw rows, keys or documents on a connection of its own and looks for the plain
values (arguments, status messages, questions, answers, result, error message and data)."""

from __future__ import annotations

import dataclasses
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    MemoryBackend,
    MemoryTaskStore,
    NewTask,
    Progress,
    RequireInput,
    WorkSpec,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks.domain.errors import DecryptionFailed, DuplicateTaskId, UnknownEncryptionKey
from mcp_tasks.stores.encrypted import EncryptedStore, EncryptionKey, Keyring, new_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

#: Every plain value a task carries of its user's data; none may reach the database.
SECRETS = {
    "arguments": "arg-4f1d-plain",
    "status message": "status-9a2c-plain",
    "question": "question-77b0-plain",
    "answer": "answer-c3e8-plain",
    "result": "result-1d5f-plain",
    "error message": "errmsg-6b41-plain",
    "error data": "errdata-0e92-plain",
}
#: What stays plain (claims select on it): proves the raw reading sees the tasks at all.
TOOL = "tool-5c7a-visible"

KEYS = Keyring.parse(f"k1:{new_key()}")

RawRead = Callable[[], Awaitable[str]]


async def write_tasks(store: Store) -> tuple[str, str]:
    """One task that asks, is answered and completes; one that fails. Their ids."""
    done, failed = new_task_id(), new_task_id()
    work = WorkSpec(type=TOOL, input={"path": SECRETS["arguments"]})
    for task_id in (done, failed):
        await store.create(NewTask(task_id, owner="alice", work=work))
        await store.put_status(task_id, Progress(SECRETS["status message"]))
    question = {"method": "elicitation/create", "params": {"message": SECRETS["question"]}}
    await store.put_status(done, RequireInput({"q": question}))
    await store.update(done, "alice", {"q": {"action": "accept", "content": SECRETS["answer"]}})
    await store.put_status(
        done, Complete({"content": [{"type": "text", "text": SECRETS["result"]}]})
    )
    error = {"code": -32000, "message": SECRETS["error message"], "data": SECRETS["error data"]}
    await store.put_status(failed, Fail(error))
    return done, failed


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis", "mongodb"])
async def raw_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, RawRead]]:
    """A store of each backend on a real server, in a namespace of its own (dropped
    afterwards), and a reader of everything it holds, as its database holds it."""
    scheme = request.param
    if scheme == "memory":
        backend = MemoryBackend()

        async def memory_raw() -> str:
            return repr([dataclasses.asdict(r) for r in backend.tasks.values()])

        yield MemoryTaskStore(backend=backend), memory_raw
        return
    if scheme == "sqlite":
        url = f"sqlite:///{tmp_path / 'tasks.db'}"
        path = tmp_path / "tasks.db"

        async def raw() -> str:
            return sqlite_raw(path)

    else:
        servers = request.getfixturevalue("store_servers")
        url = namespaced_url(servers.store_url(scheme), "mcpt_raw_" + secrets.token_hex(5))
        raw = {"postgresql": postgres_raw, "redis": redis_raw, "mongodb": mongodb_raw}[scheme](url)
    store = store_from_url(url)
    try:
        yield store, raw
    finally:
        await store.close()
        if scheme != "sqlite":
            await drop_namespace(url)


def sqlite_raw(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return repr([conn.execute(f'SELECT * FROM "{n}"').fetchall() for n in names])


def postgres_raw(url: str) -> RawRead:
    async def read() -> str:
        import asyncpg  # noqa: PLC0415

        from mcp_tasks.stores.opening import locate  # noqa: PLC0415

        schema = locate(url).namespace
        base = url.split("?", 1)[0]
        conn = await asyncpg.connect(base)
        try:
            tables = await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = $1", schema
            )
            rows = [
                [tuple(r) for r in await conn.fetch(f'SELECT * FROM "{schema}"."{t["tablename"]}"')]
                for t in tables
            ]
            return repr(rows)
        finally:
            await conn.close()

    return read


def redis_raw(url: str) -> RawRead:
    async def read() -> str:
        import redis.asyncio as aioredis  # noqa: PLC0415

        from mcp_tasks.stores.opening import locate  # noqa: PLC0415

        prefix = locate(url).namespace
        client = aioredis.from_url(url.split("?", 1)[0])
        held: list[Any] = []
        try:
            async for key in client.scan_iter(match=f"*{prefix}*"):
                kind = (await client.type(key)).decode()
                if kind == "string":
                    held.append(await client.get(key))
                elif kind == "hash":
                    held.append(await client.hgetall(key))
                elif kind == "zset":
                    held.append(await client.zrange(key, 0, -1, withscores=True))
                elif kind == "set":
                    held.append(await client.smembers(key))
                elif kind == "list":
                    held.append(await client.lrange(key, 0, -1))
                else:
                    held.append(await client.dump(key))
                held.append(key)
        finally:
            await client.aclose()
        return repr(held)

    return read


def mongodb_raw(url: str) -> RawRead:
    async def read() -> str:
        from pymongo import AsyncMongoClient  # noqa: PLC0415

        from mcp_tasks.stores.opening import locate  # noqa: PLC0415

        database_name, _, prefix = str(locate(url).namespace).partition(".")
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url.split("?", 1)[0])
        try:
            database = client[database_name]
            held = []
            for name in ("tasks", "meta"):
                collection = database[f"{prefix}_{name}"]
                held.append([doc async for doc in collection.find({})])
            return repr(held)
        finally:
            await client.close()

    return read


async def test_the_database_holds_no_plain_user_data(raw_store: tuple[Store, RawRead]) -> None:
    """Written through EncryptedStore, no argument, status message, question, answer, result
    or error of a task appears in the store's raw rows, keys or documents; the tool name a
    claim selects on does, and every value reads back plain through the store."""
    inner, raw = raw_store
    store = EncryptedStore(inner, KEYS)
    done, failed = await write_tasks(store)
    held = await raw()
    assert TOOL in held
    assert [what for what, value in SECRETS.items() if value in held] == []
    completed = await store.get(done, "alice")
    assert completed.work is not None
    assert completed.work.input == {"path": SECRETS["arguments"]}
    assert completed.input_responses["q"] == {"action": "accept", "content": SECRETS["answer"]}
    assert completed.result == {"content": [{"type": "text", "text": SECRETS["result"]}]}
    error = (await store.get(failed, "alice")).error
    assert error == {
        "code": -32000,
        "message": SECRETS["error message"],
        "data": SECRETS["error data"],
    }


async def test_plain_tasks_stay_readable_and_unknown_keys_are_named() -> None:
    """A task written before encryption reads back as it was; one sealed under a key the
    reader does not have raises UnknownEncryptionKey naming the key id, never the key; a
    row given another owner no longer opens (DecryptionFailed)."""
    backend = MemoryBackend()
    plain = MemoryTaskStore(backend=backend)
    old = new_task_id()
    await plain.create(
        NewTask(old, owner="alice", work=WorkSpec("t", {"a": 1}), status_message="m")
    )
    sealing = EncryptedStore(MemoryTaskStore(backend=backend), KEYS)
    record = await sealing.get(old, "alice")
    assert (record.work.input if record.work else None, record.status_message) == ({"a": 1}, "m")
    sealed = new_task_id()
    await sealing.create(NewTask(sealed, owner="alice", work=WorkSpec("t", {"a": 2})))
    secret = new_key()
    other = EncryptedStore(MemoryTaskStore(backend=backend), Keyring.parse(f"k2:{secret}"))
    with pytest.raises(UnknownEncryptionKey) as unknown:
        await other.get(sealed, ANY_OWNER)
    assert unknown.value.key_id == "k1"
    assert "'k1'" in str(unknown.value)
    assert secret not in str(unknown.value)
    rotated = Keyring([EncryptionKey.parse(f"k2:{secret}"), *KEYS.keys])
    both = EncryptedStore(MemoryTaskStore(backend=backend), rotated)
    opened = await both.get(sealed, "alice")
    assert opened.work is not None
    assert opened.work.input == {"a": 2}
    moved = dataclasses.replace(backend.tasks[sealed], owner="mallory")
    backend.put(moved)
    with pytest.raises(DecryptionFailed):
        await sealing.get(sealed, "mallory")


async def test_a_refused_create_teaches_no_owner() -> None:
    """A create refused as a duplicate id (another owner's) leaves the handle's memory of
    owners alone: its next worker write is sealed for the task's real owner and opens."""
    backend = MemoryBackend()
    store = EncryptedStore(MemoryTaskStore(backend=backend), KEYS)
    task_id = new_task_id()
    await EncryptedStore(MemoryTaskStore(backend=backend), KEYS).create(
        NewTask(task_id, owner="alice", work=WorkSpec("t", {"a": 1}))
    )
    with pytest.raises(DuplicateTaskId):
        await store.create(NewTask(task_id, owner="mallory", work=WorkSpec("t", {"a": 2})))
    await store.put_status(task_id, Progress("half way"))
    assert (await store.get(task_id, "alice")).status_message == "half way"

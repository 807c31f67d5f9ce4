"""Rotating the key at rest: ``rekey`` re-seals a store under the first key while servers
write to it, loses none of their writes, and a second run has nothing left to do."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    Progress,
    RequireInput,
    WorkSpec,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks.cli import main
from mcp_tasks.domain.models import input_digest
from mcp_tasks.stores.abilities import Rewrites
from mcp_tasks.stores.encrypted import KEYS_ENV, EncryptedStore, Keyring, new_key, sealed_under
from mcp_tasks.stores.rekey import rekey

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

OLD, NEW = f"old:{new_key()}", f"new:{new_key()}"
QUESTION = {"method": "elicitation/create", "params": {"message": "Proceed?"}}
#: Progress writes each server makes to each task while rekey runs.
WRITES = 6


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A store URL of each kind (memory shared by name, a SQLite file, a Postgres schema)."""
    if request.param == "memory":
        yield f"memory://rekey_{secrets.token_hex(4)}"
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
        return
    url = namespaced_url(
        request.getfixturevalue("postgres_url"), "mcpt_rekey_" + secrets.token_hex(5)
    )
    yield url
    await drop_namespace(url)


async def populate(store: Store, count: int) -> list[str]:
    """Tasks in every shape: arguments, a question asked, one answered, a result, an error."""
    ids = []
    for n in range(count):
        task_id = new_task_id()
        ids.append(task_id)
        work = WorkSpec(type="tool", input={"n": n, "secret": f"arg-{n}"})
        await store.create(NewTask(task_id, owner="alice", work=work, status_message=f"s{n}"))
        match n % 4:
            case 1:
                await store.put_status(task_id, RequireInput({"q": QUESTION}))
            case 2:
                await store.put_status(task_id, RequireInput({"q": QUESTION}))
                await store.update(task_id, "alice", {"q": {"action": "accept"}})
            case 3:
                done = Complete({"v": n}) if n % 8 == 3 else Fail({"code": 1, "message": f"e{n}"})
                await store.put_status(task_id, done)
    return ids


async def test_rekey_beside_writing_servers_reseals_every_task_and_keeps_every_write(
    store_url: str,
) -> None:
    """Tasks written plain and under the old key; servers then run with [new, old] and
    write progress to the live ones while rekey runs in batches of 3: afterwards every task
    is sealed under the new key only, opens with the new key alone, shows what it held
    (arguments, answers, the asked digest) and every write of the servers (its revision
    counts them); a second rekey re-seals nothing."""
    plain = store_from_url(store_url)
    old = EncryptedStore(store_from_url(store_url), Keyring.parse(OLD))
    rotated = Keyring.parse(f"{NEW},{OLD}")
    servers = [EncryptedStore(store_from_url(store_url), rotated) for _ in range(2)]
    operator = store_from_url(store_url)
    try:
        ids = await populate(plain, 4) + await populate(old, 16)
        before = {i: await servers[0].get(i, ANY_OWNER) for i in ids}
        live = [i for i in ids if not before[i].status.is_terminal]

        async def write(server: Store, task_id: str) -> None:
            for n in range(WRITES):
                await server.put_status(task_id, Progress(f"p{n}"))
                await anyio.lowlevel.checkpoint()

        assert isinstance(operator, Rewrites)
        async with anyio.create_task_group() as group:
            for k, task_id in enumerate(live):
                group.start_soon(write, servers[k % 2], task_id)
            done = await rekey(operator, rotated, batch=3)
        assert done.read == len(ids)
        assert done.resealed == len(ids)

        new_only = EncryptedStore(store_from_url(store_url), Keyring.parse(NEW))
        for task_id in ids:
            raw = await plain.get(task_id, ANY_OWNER)
            assert sealed_under(raw) == {"new"}
            now = await new_only.get(task_id, "alice")
            was = before[task_id]
            assert now.work == was.work
            assert (now.input_requests, now.input_responses) == (
                was.input_requests,
                was.input_responses,
            )
            assert (now.result, now.error) == (was.result, was.error)
            assert now.asked_inputs == was.asked_inputs
            if "q" in now.asked_inputs:
                assert now.asked_inputs["q"] == input_digest(QUESTION)
            if task_id in live:
                assert now.revision == was.revision + WRITES
                assert now.status_message == f"p{WRITES - 1}"
            else:
                assert now == was
        await new_only.close()
        again = await rekey(operator, rotated, batch=3)
        assert (again.read, again.resealed) == (len(ids), 0)
    finally:
        for store in (plain, old, *servers, operator):
            await store.close()


def test_the_rekey_command_reseals_a_store_and_keygen_makes_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp-tasks keygen` prints KID:KEY; `mcp-tasks rekey --store URL` with
    --encryption-keys-file re-seals the store's tasks and says how many; without keys it is
    a usage error (exit 2)."""
    assert main(["keygen", "--id", "fresh"]) == 0
    fresh = capsys.readouterr().out.strip()
    assert fresh.startswith("fresh:")
    url = f"sqlite:///{tmp_path / 'tasks.db'}"

    async def write() -> str:
        store = EncryptedStore(store_from_url(url), Keyring.parse(OLD))
        try:
            task_id = new_task_id()
            await store.create(NewTask(task_id, work=WorkSpec("tool", {"a": 1})))
            return task_id
        finally:
            await store.close()

    task_id = anyio.run(write)
    keys = tmp_path / "keys"
    keys.write_text(f"{fresh}\n{OLD}\n")
    monkeypatch.delenv(KEYS_ENV, raising=False)
    assert main(["rekey", "--store", url]) == 2
    capsys.readouterr()
    assert main(["rekey", "--store", url, "--encryption-keys-file", str(keys)]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("1 task read, 1 re-sealed under key fresh")
    assert fresh.split(":", 1)[1] not in out

    async def read() -> object:
        store = EncryptedStore(store_from_url(url), Keyring.parse(fresh))
        try:
            record = await store.get(task_id, ANY_OWNER)
            return None if record.work is None else record.work.input
        finally:
            await store.close()

    assert anyio.run(read) == {"a": 1}

"""`mcp-tasks stress`: the workload's invariants hold on real stores; the report is JSON.

Each store runs the whole workload: memory, a SQLite file and a fresh Postgres schema
(dropped afterwards; the servers are the ones their backends provision, ``store_servers``: a
missing one skips locally and fails when ``CI`` is set).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks.cli import main
from mcp_tasks.domain.errors import StoreUnavailable, TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.stores.opening import NamespacesNotSupported, mask_password, store_from_url
from mcp_tasks_contract.cli import stress
from mcp_tasks_contract.store_servers import unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


TASKS, CONCURRENCY, LEASE_MS = 60, 8, 300
CONTENDED = TASKS // stress.CAS_EVERY  # 3 tasks, each CAS_ROUNDS rounds of CONCURRENCY writers
RECOVER = TASKS // stress.RECOVER_EVERY  # 12 crash-and-recover tasks
CRASHES = len(range(0, RECOVER, stress.CRASH_EVERY))  # every third: 4

#: The invariants of the compare-and-set contention and crash-and-recover phases, by name.
CAS_AND_RECOVERY = (
    "per round per task exactly one compare-and-set write applies; "
    "every other gets RevisionConflict",
    "the final revision equals the applied writes: none lost or doubled",
    "workers claim their own tasks by id, each once, at generation 1",
    "recovery claims without a task id take exactly the crashed tasks, once each, "
    "at generation 2, only after their leases ran out by the store's clock",
    "recovery claimed only this run's tasks; then nothing was left to claim",
    "every task completes exactly once, with the result of its one applied Complete, "
    "written by the holder of its last claim",
    "every late commit with a crashed worker's stale lease is refused (StaleLease) "
    "and changes nothing",
    "claims and releases balance: each claim ends once, by a release after completing "
    "or (a crashed worker's) by running out",
    "a normal task ends at generation 1, a recovered one at generation 2",
)


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on each real backend; a Postgres schema or a Redis prefix of its own,
    dropped afterwards."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'stress.db'}"
    elif request.param == "redis":
        url = namespaced_url(
            request.getfixturevalue("redis_url"), "mcpt_stress_" + secrets.token_hex(6)
        )
        try:
            yield url
        finally:
            anyio.run(drop_namespace, url)
    else:
        server = request.getfixturevalue("postgres_url")
        url = namespaced_url(server, "mcpt_stress_" + secrets.token_hex(6))
        try:
            anyio.run(_first_use, url)
        except StoreUnavailable as error:  # e.g. a configured URL nothing answers on
            unavailable("PostgreSQL", f"{mask_password(server)} did not answer: {error.__cause__}")
        try:
            yield url
        finally:
            anyio.run(drop_namespace, url)


async def _first_use(url: str) -> None:
    """One read of a random id on `url` (creating its schema): the server answers."""
    store = store_from_url(url)
    try:
        await store.get(new_task_id(), ANY_OWNER)
    except TaskNotFound:
        pass
    finally:
        await store.close()


def test_stress_invariants_hold(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every invariant holds (exit 0) and each phase reports its exact operation count."""
    code = main(
        [
            *("stress", "--store", store_url, "--tasks", str(TASKS)),
            *("--concurrency", str(CONCURRENCY), "--lease-ms", str(LEASE_MS), "--json"),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["ok"] is True
    assert report["tasks"] == TASKS
    invariants = {item["name"]: item for item in report["invariants"]}
    assert "exactly one of two racing claims wins each live task" in invariants
    assert all(item["ok"] for item in report["invariants"]), report["invariants"]
    for name in CAS_AND_RECOVERY:
        assert invariants[name]["ok"] is True, name
    counts = {phase["name"]: phase["ops"] for phase in report["phases"]}
    assert counts["create"] == TASKS
    assert counts["cancel"] == 12  # every fifth task
    assert counts["reap"] >= 6

    rounds = CONTENDED * stress.CAS_ROUNDS
    assert counts["compare-and-set contention (writes)"] == rounds * CONCURRENCY
    assert invariants[CAS_AND_RECOVERY[0]]["detail"] == (
        f"{rounds} rounds ({CONTENDED} tasks x {stress.CAS_ROUNDS}) of {CONCURRENCY} writers: "
        f"{rounds} applied, {rounds * (CONCURRENCY - 1)} RevisionConflict"
    )
    assert invariants[CAS_AND_RECOVERY[1]]["detail"] == f"final revisions [{stress.CAS_ROUNDS}]"

    assert counts["recover: create"] == RECOVER
    assert counts["recover: workers claim; 1 in 3 crash"] == RECOVER
    assert counts["recover: wait out leases; claim w/o id"] == CRASHES
    assert invariants[CAS_AND_RECOVERY[2]]["detail"] == f"{RECOVER} claims for {RECOVER} tasks"
    assert invariants[CAS_AND_RECOVERY[3]]["detail"].startswith(
        f"{CRASHES} crashed, {CRASHES} recovered; "
    )
    assert invariants[CAS_AND_RECOVERY[4]]["detail"] == "0 claims of other tasks"
    assert invariants[CAS_AND_RECOVERY[5]]["detail"] == (
        f"{RECOVER} tasks, {RECOVER} applied completions"
    )
    assert invariants[CAS_AND_RECOVERY[6]]["detail"] == (
        f"{CRASHES} crashes; late commits: {CRASHES} refused"
    )
    healthy = RECOVER - CRASHES
    assert invariants[CAS_AND_RECOVERY[7]]["detail"] == (
        f"{RECOVER + CRASHES} claims = {healthy} released by workers after completing "
        f"+ {CRASHES} released by recovery after completing + {CRASHES} ran out"
    )
    assert invariants[CAS_AND_RECOVERY[8]]["detail"].endswith(f"got {healthy} at 1, {CRASHES} at 2")
    _assert_dropped(report["recovery_store"], store_url)


def _assert_dropped(recovery_url: str, store_url: str) -> None:
    """The crash-and-recover phase ran in a namespace of its own, and it is gone."""
    query = parse_qs(urlsplit(recovery_url).query)
    if store_url.startswith("memory"):
        assert recovery_url.startswith("memory://stress_")
    elif store_url.startswith("sqlite"):
        (prefix,) = query["table_prefix"]
        assert prefix.startswith("stress_")
        with sqlite3.connect(urlsplit(store_url).path[1:]) as db:
            names = [row[0] for row in db.execute("SELECT name FROM sqlite_master")]
        db.close()
        assert names, "the store's own tables are there"
        assert not [name for name in names if name.startswith(prefix)]
    elif store_url.startswith("redis"):
        (prefix,) = query["prefix"]
        assert prefix.startswith("stress_")
        assert not anyio.run(_redis_keys, store_url, prefix)
    else:
        (schema,) = query["schema"]
        assert schema.startswith("stress_")
        assert not anyio.run(_schema_exists, store_url, schema)


async def _redis_keys(url: str, prefix: str) -> list[bytes]:
    from redis.asyncio import Redis  # noqa: PLC0415  # the Redis backend's driver, there when it is

    client = Redis.from_url(urlsplit(url)._replace(query="").geturl())
    try:
        return [key async for key in client.scan_iter(match="{" + prefix + "}:*")]
    finally:
        await client.aclose()


async def _schema_exists(url: str, schema: str) -> bool:
    import asyncpg  # noqa: PLC0415  # the Postgres backend's driver, there when it is

    parts = urlsplit(url)
    conn = await asyncpg.connect(parts._replace(query="").geturl())
    try:
        found = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema)
    finally:
        await conn.close()
    return bool(found)


def test_stress_prints_every_phase_readably(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json every phase and invariant is one line; the namespace is named."""
    code = main(["stress", "--store", "memory://", "--tasks", "20", "--lease-ms", "100"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "crash-and-recover namespace (dropped afterwards): memory://stress_" in out
    assert "compare-and-set contention (writes)" in out
    for name in CAS_AND_RECOVERY:
        assert f"ok  {name}" in out


def test_stress_refuses_a_store_without_namespaces(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Claims without a task id need a namespace of their own: without one, a usage error
    (exit 2) before anything is written."""

    def no_namespaces(url: str, namespace: str) -> str:
        raise NamespacesNotSupported

    monkeypatch.setattr(stress, "namespaced_url", no_namespaces)
    assert main(["stress", "--store", "memory://"]) == 2
    assert "no namespaces" in capsys.readouterr().err


def test_stress_rejects_nonsense_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """Sizes that cannot make a race are a usage error (exit 2)."""
    assert main(["stress", "--store", "memory://", "--concurrency", "1"]) == 2
    assert "--concurrency" in capsys.readouterr().err
    assert main(["stress", "--store", "memory://", "--lease-ms", "0"]) == 2
    assert "--lease-ms" in capsys.readouterr().err

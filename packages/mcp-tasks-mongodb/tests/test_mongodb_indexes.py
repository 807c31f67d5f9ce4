"""The store's hot queries use its indexes: explain() shows an index scan, never a
collection scan, for get, claim (by id and the oldest eligible task), the caps and reap.

Each explained command is the one the store sends, filter, sort and hint alike, except that
``$$NOW`` is a literal (explain does not evaluate it on every server; the residual filter
it sits in does not choose the plan)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import NewTask, StoreOptions, WorkSpec, new_task_id
from mcp_tasks_mongodb import pipelines
from mcp_tasks_mongodb.store import _read_pipeline

NOW = 1_800_000_000_000

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks_mongodb import MongoTaskStore

pytestmark = pytest.mark.anyio


def _at_now(value: Any) -> Any:
    """``value`` with the server's now (``$$NOW``, or ``pipelines.NOW``: it as a number) replaced by
    the literal ``NOW``."""
    if value in (pipelines.NOW, "$$NOW"):
        return NOW
    if isinstance(value, dict):
        return {key: _at_now(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_at_now(item) for item in value]
    return value


def _stages(plan: Any) -> list[str]:
    """Every stage name in a winning plan (inputStage, inputStages, queryPlan nested)."""
    found: list[str] = []
    if isinstance(plan, dict):
        if "stage" in plan:
            found.append(plan["stage"])
        for value in plan.values():
            found += _stages(value)
    elif isinstance(plan, list):
        for value in plan:
            found += _stages(value)
    return found


async def _explain(mongodb_url: str, store: MongoTaskStore, command: dict[str, Any]) -> list[str]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        explained = await client[store.database].command({"explain": command})
    finally:
        await client.close()
    return _stages(_winning_plans(explained))


def _winning_plans(explained: Any) -> list[Any]:
    """Every winningPlan in an explain answer (an aggregation nests its own)."""
    if isinstance(explained, dict):
        plans = [explained["winningPlan"]] if "winningPlan" in explained else []
        for key, value in explained.items():
            if key != "winningPlan":
                plans += _winning_plans(value)
        return plans
    if isinstance(explained, list):
        return [plan for value in explained for plan in _winning_plans(value)]
    return []


@pytest.fixture
async def store(open_store: OpenStore) -> MongoTaskStore:
    store = await open_store(StoreOptions(max_rows=None))
    for _ in range(5):
        await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    return store


def _uses_an_index(stages: list[str]) -> None:
    assert stages
    assert "COLLSCAN" not in stages, stages
    assert {"IXSCAN", "IDHACK", "EXPRESS_IXSCAN"} & set(stages), stages


async def test_get_reads_by_id(store: MongoTaskStore, mongodb_url: str) -> None:
    """get (and the read of update, cancel and put_status) is one aggregation by _id."""
    pipeline = _at_now(_read_pipeline("x"))
    command = {"aggregate": f"{store.prefix}_tasks", "pipeline": pipeline, "cursor": {}}
    _uses_an_index(await _explain(mongodb_url, store, command))


def _claim(store: MongoTaskStore, query: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "findAndModify": f"{store.prefix}_tasks",
        "query": _at_now(query),
        "update": [{"$set": {"generation": {"$add": ["$generation", 1]}}}],
        **more,
    }


async def test_claim_without_an_id_walks_the_claim_order_index(
    store: MongoTaskStore, mongodb_url: str
) -> None:
    """The ready lane's ids in rules.claim_order, read through the claim_order index; each
    is then claimed by id."""
    first = pipelines.claim_order()
    after = pipelines.claim_order({"created_at": NOW, "_id": "x"})
    typed = frozenset({"job", "other"})  # S-CLAIM.4: through the claim_type_order index
    first_typed = pipelines.claim_order(None, typed)
    after_typed = pipelines.claim_order({"created_at": NOW, "_id": "x"}, typed)
    for page, sort, index in (first, after, first_typed, after_typed):
        command = {
            "find": f"{store.prefix}_tasks",
            "filter": page,
            "projection": {"_id": 1, "created_at": 1},
            "sort": dict(sort),
            "hint": index,
            "limit": 16,
        }
        _uses_an_index(await _explain(mongodb_url, store, command))


async def test_claim_by_id_reads_by_id(store: MongoTaskStore, mongodb_url: str) -> None:
    """A claim (and a renew) is a find_one_and_update by _id alone: rules.claimable guards
    the pipeline, not the filter."""
    _uses_an_index(await _explain(mongodb_url, store, _claim(store, {"_id": "x"})))


async def test_claim_promotes_waiting_tasks_by_index(
    store: MongoTaskStore, mongodb_url: str
) -> None:
    """The due waiting tasks a claim moves to the ready lane are found by index."""
    command = {
        "find": f"{store.prefix}_tasks",
        "filter": pipelines.due(NOW),
    }
    _uses_an_index(await _explain(mongodb_url, store, command))


async def test_reap_finds_due_tasks_by_index(store: MongoTaskStore, mongodb_url: str) -> None:
    for condition, index in store._reapable(NOW):
        command = {"find": f"{store.prefix}_tasks", "filter": condition, "hint": index}
        _uses_an_index(await _explain(mongodb_url, store, command))


async def test_the_caps_count_by_index(store: MongoTaskStore, mongodb_url: str) -> None:
    unexpired = pipelines.unexpired(NOW)
    owner = pipelines.active("alice", NOW)
    for query, index in ((unexpired, "expiry"), (owner, "owner_active")):
        command = {"count": f"{store.prefix}_tasks", "query": query, "hint": index}
        _uses_an_index(await _explain(mongodb_url, store, command))


async def test_migrate_gives_older_tasks_their_work_type(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A collection from before the ``work_type`` field (S-CLAIM.4): the first use of a
    handle creates its index and fills the field of the claimable tasks from their payload,
    so claims for the type find the tasks written before."""
    old = await open_store(StoreOptions(max_rows=None))
    alpha = await old.create(NewTask(new_task_id(), work=WorkSpec("alpha")))
    beta = await old.create(NewTask(new_task_id(), work=WorkSpec("beta")))
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        tasks = client[old.database][f"{old.prefix}_tasks"]
        await tasks.drop_index("claim_type_order")
        await tasks.update_many({}, {"$unset": {"work_type": ""}})
    finally:
        await client.close()
    store = await open_store(StoreOptions(max_rows=None))
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"beta"}))
    assert claimed is not None
    assert claimed.record.task_id == beta.task_id
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"alpha"}))
    assert claimed is not None
    assert claimed.record.task_id == alpha.task_id

"""The store's hot queries use its indexes: explain() shows an index scan, never a
collection scan, for get, claim (by id and the oldest eligible task) and reap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import NewTask, StoreOptions, WorkSpec, new_task_id
from mcp_tasks_mongodb.store import _CLAIMABLE_NOW, _READ_PROJECTION

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks_mongodb import MongoTaskStore

pytestmark = pytest.mark.anyio


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


async def test_get_reads_by_id(store: MongoTaskStore, mongodb_url: str) -> None:
    """get (and the read of update, cancel and put_status) is one aggregation by _id."""
    pipeline = [{"$match": {"_id": "x"}}, {"$limit": 1}, {"$project": _READ_PROJECTION}]
    command = {"aggregate": f"{store.prefix}_tasks", "pipeline": pipeline, "cursor": {}}
    stages = await _explain(mongodb_url, store, command)
    assert "COLLSCAN" not in stages
    assert {"IDHACK", "IXSCAN", "EXPRESS_IXSCAN", "CLUSTERED_IXSCAN"} & set(stages), stages


async def test_claim_without_an_id_walks_the_claim_order_index(
    store: MongoTaskStore, mongodb_url: str
) -> None:
    command = {
        "findAndModify": f"{store.prefix}_tasks",
        "query": {"runnable": True, "lane": "ready", "$expr": _CLAIMABLE_NOW},
        "sort": {"created_at": 1, "_id": 1},
        "update": [{"$set": {"generation": {"$add": ["$generation", 1]}}}],
    }
    stages = await _explain(mongodb_url, store, command)
    assert "COLLSCAN" not in stages
    assert "IXSCAN" in stages, stages
    assert "SORT" not in stages  # the index gives rules.claim_order itself


async def test_claim_by_id_reads_by_id(store: MongoTaskStore, mongodb_url: str) -> None:
    command = {
        "findAndModify": f"{store.prefix}_tasks",
        "query": {"_id": "x", "runnable": True, "$expr": _CLAIMABLE_NOW},
        "sort": {"created_at": 1, "_id": 1},
        "update": [{"$set": {"generation": {"$add": ["$generation", 1]}}}],
    }
    stages = await _explain(mongodb_url, store, command)
    assert "COLLSCAN" not in stages, stages


async def test_claim_promotes_waiting_tasks_by_index(
    store: MongoTaskStore, mongodb_url: str
) -> None:
    command = {
        "update": f"{store.prefix}_tasks",
        "updates": [
            {
                "q": {"lane": "waiting", "wait_until": {"$lte": 10**13}},
                "u": {"$set": {"lane": "ready", "wait_until": None}},
                "multi": True,
            }
        ],
    }
    stages = await _explain(mongodb_url, store, command)
    assert "COLLSCAN" not in stages
    assert "IXSCAN" in stages, stages


async def test_reap_finds_due_tasks_by_index(store: MongoTaskStore, mongodb_url: str) -> None:
    for condition in store._reapable(10**13):
        stages = await _explain(
            mongodb_url, store, {"find": f"{store.prefix}_tasks", "filter": condition}
        )
        assert "COLLSCAN" not in stages
        assert "IXSCAN" in stages, stages

"""The Store protocol has no enumeration method; the memory store has every operation."""

from __future__ import annotations

from mcp_tasks import STORE_OPERATIONS, MemoryTaskStore, Store
from mcp_tasks_contract.structure import (
    enumeration_methods,
    operation_problems,
    protocol_operations,
)


def test_protocol_declares_exactly_the_store_operations() -> None:
    """The Store protocol's public methods are STORE_OPERATIONS, nothing more or less."""
    assert protocol_operations() == STORE_OPERATIONS


def test_protocol_has_no_enumeration_method() -> None:
    """S-NOLIST: nothing on the protocol is named like list/scan/iter/count/keys/all/find…"""
    assert enumeration_methods(Store) == []


def test_memory_store_implements_every_operation() -> None:
    """The memory store has every operation, async, with the protocol's signature."""
    assert operation_problems(MemoryTaskStore) == []
    assert enumeration_methods(MemoryTaskStore) == []


class _Lacking:
    async def create(self, task: object) -> None: ...
    async def get(self, task_id: str) -> None: ...
    def close(self) -> None: ...
    async def list_tasks(self) -> None: ...
    async def count(self) -> int:
        return 0

    async def iter_ids(self) -> None: ...


def test_the_checks_catch_missing_wrong_and_enumerating_methods() -> None:
    """Missing operations, a sync method, a wrong signature and list-like names are reported."""
    problems = operation_problems(_Lacking)
    assert any(p.startswith("get: signature") for p in problems)
    assert "close: not an async method" in problems
    for name in ("update", "cancel", "put_status", "claim", "renew", "release", "reap"):
        assert f"{name}: missing" in problems
    assert not any(p.startswith("create") for p in problems)
    assert enumeration_methods(_Lacking) == ["count", "iter_ids", "list_tasks"]

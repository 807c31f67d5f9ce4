"""S-OPS and S-NOLIST on the store under test: every operation, and nothing to enumerate with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import Store
from mcp_tasks_contract.structure import enumeration_methods, operation_problems
from mcp_tasks_contract.suite.base import ContractBase

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


class StructureContract(ContractBase):
    """S-OPS, S-NOLIST."""

    @pytest.mark.rule("S-OPS")
    async def test_store_implements_every_operation(self, handles: StoreHandles) -> None:
        """The handle is a Store: every STORE_OPERATIONS method, async, with the protocol's
        parameter names, kinds and defaults."""
        store = await handles.open()
        assert isinstance(store, Store)
        assert operation_problems(store) == []

    @pytest.mark.rule("S-NOLIST")
    async def test_store_offers_no_enumeration(self, handles: StoreHandles) -> None:
        """No public attribute of the handle is named like a way to list, scan or count tasks."""
        store = await handles.open()
        assert enumeration_methods(store) == []

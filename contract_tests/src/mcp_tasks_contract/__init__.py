"""The shared Store contract suite of mcp-tasks: subclass ``StoreContract``, override ``store``.

The names below load on first use: the pytest plugin imports this package at startup and
must register the suite for assert rewriting before the suite itself is imported.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreFactory, StoreHandles, new_namespace
    from mcp_tasks_contract.offers import Offers
    from mcp_tasks_contract.rules import RULES
    from mcp_tasks_contract.store_servers import StoreServers
    from mcp_tasks_contract.suite import StoreContract
    from mcp_tasks_contract.suite.stats import StatsContract
    from mcp_tasks_contract.urls import UrlStoreFactory
    from mcp_tasks_contract.versions import CONTRACT_VERSION

__all__ = [
    "CONTRACT_VERSION",
    "RULES",
    "Offers",
    "StatsContract",
    "StoreContract",
    "StoreFactory",
    "StoreHandles",
    "StoreServers",
    "UrlStoreFactory",
    "new_namespace",
]

_HOMES = {
    "CONTRACT_VERSION": "mcp_tasks_contract.versions",
    "RULES": "mcp_tasks_contract.rules",
    "Offers": "mcp_tasks_contract.offers",
    "StatsContract": "mcp_tasks_contract.suite.stats",
    "StoreContract": "mcp_tasks_contract.suite",
    "StoreFactory": "mcp_tasks_contract.handles",
    "StoreHandles": "mcp_tasks_contract.handles",
    "StoreServers": "mcp_tasks_contract.store_servers",
    "UrlStoreFactory": "mcp_tasks_contract.urls",
    "new_namespace": "mcp_tasks_contract.handles",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)

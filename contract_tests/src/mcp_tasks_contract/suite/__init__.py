"""The contract, part by part; :class:`StoreContract` gathers every part into one class."""

from __future__ import annotations

from mcp_tasks_contract.suite.agreement import RuleAgreementContract
from mcp_tasks_contract.suite.caller import CallerContract
from mcp_tasks_contract.suite.cancel import CancelContract
from mcp_tasks_contract.suite.claims import ClaimContract
from mcp_tasks_contract.suite.close import CloseContract
from mcp_tasks_contract.suite.create import CreateContract
from mcp_tasks_contract.suite.durable import DurableContract
from mcp_tasks_contract.suite.optional import OptionalContract
from mcp_tasks_contract.suite.payloads import JSONContract
from mcp_tasks_contract.suite.put import PutContract
from mcp_tasks_contract.suite.races import RaceContract
from mcp_tasks_contract.suite.read import GetContract
from mcp_tasks_contract.suite.reap import ReapContract
from mcp_tasks_contract.suite.stale_cancel import StaleCancelContract
from mcp_tasks_contract.suite.stateful import StatefulContract
from mcp_tasks_contract.suite.structural import StructureContract
from mcp_tasks_contract.suite.ttl import TTLContract
from mcp_tasks_contract.suite.update import UpdateContract

__all__ = ["StoreContract"]


class StoreContract(
    StructureContract,
    CreateContract,
    GetContract,
    UpdateContract,
    CancelContract,
    StaleCancelContract,
    PutContract,
    ClaimContract,
    ReapContract,
    TTLContract,
    CallerContract,
    CloseContract,
    JSONContract,
    DurableContract,
    RuleAgreementContract,
    RaceContract,
    StatefulContract,
    OptionalContract,
):
    """The whole Store contract. Subclass it as ``Test…`` and override the ``store`` fixture.

    ``store`` returns (or yields) an async factory ``(namespace, options) -> Store`` that
    opens a NEW handle on ``namespace`` at each call. Declare what the store offers beyond
    the contract in ``offers``; knobs: ``stateful_max_examples``, ``stateful_shrink_s``.
    """

"""The version of the Store contract this suite checks, and what each version changed.

The version counts changes to the rules a store must keep, not releases: it goes up when a
rule is added or asks more of a store, so that a store passing version N may fail N + 1.
A store author pins the version the store was written against
(``StoreContract.contract_version``, ``--contract-version N`` or the ``contract_version``
ini option). The suite still checks every rule of :data:`CONTRACT_VERSION`; with a pin,
its report names what is new since the pin, and marks each failure of a rule newer than the
pin with what changed (docs/store-contract.md, "Contract versions"; CHANGELOG.md, "For
store authors").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The version of the rules this suite checks.
CONTRACT_VERSION: Final = 5


@dataclass(frozen=True)
class RuleChange:
    """One change of the contract: the version that made it, the rules it added or
    changed (none for the optional ``stats()`` part), and what a store must now do."""

    version: int
    rules: tuple[str, ...]
    what: str


#: Every change since version 1 (the contract of mcp-tasks 0.1.0), oldest first.
CHANGES: Final[tuple[RuleChange, ...]] = (
    RuleChange(
        2,
        ("S-CREATE.2",),
        "a create refused at the owner's cap raises OwnerTaskLimitReached (a "
        "TaskLimitReached; the row cap still raises TaskLimitReached itself); a task without "
        "an owner is held to max_rows alone, never to the per-owner cap (ask "
        "StoreOptions.owner_cap(owner)); concurrent creates of one owner never pass the cap; "
        "max_active_per_owner defaults to 1 000, so the default options refuse an owner's "
        "1 001st active task",
    ),
    RuleChange(
        2,
        (),
        "the per-owner figures leave tasks without an owner out",
    ),
    RuleChange(
        3,
        ("S-CLAIM.4",),
        "claim takes work_types (frozenset[str] | None): with a set it takes only a task "
        "whose work.type is in it, by id too, in the same single step (an empty set claims "
        "nothing, None any type; rules.of_work_types); a task no claim asks for waits, its "
        "TTL still running",
    ),
    RuleChange(
        3,
        (),
        "StoreStats.waiting_unclaimed counts the claimable tasks nobody claimed for 30 s "
        "(rules.waits_unclaimed)",
    ),
    RuleChange(
        4,
        (),
        "a store that offers the optional counts() (StoreCounts: every row, the unexpired "
        "tasks per status, the row cap; the store gauges read it) gives exactly what stats() "
        "gives, across concurrent creates, status changes, claims, answers, expiry by TTL "
        "with no write, and concurrent reaps; a store without it is not tested for it",
    ),
    RuleChange(
        5,
        ("S-PUT.6",),
        "a Retry with a delay left also drops the keys of the outstanding input requests "
        "from asked_inputs (rules.unasked; answered keys stay): the next attempt may ask "
        "such a key again, with the same request or another",
    ),
)


class UnknownContractVersion(ValueError):
    """A pin this suite cannot honour: below 1, or above :data:`CONTRACT_VERSION` (a store
    written against a newer suite than the one installed)."""


def check_pin(pin: int, where: str) -> int:
    """``pin`` if this suite knows it; :class:`UnknownContractVersion` naming ``where`` else."""
    if pin < 1:
        raise UnknownContractVersion(f"{where}: contract versions start at 1, not {pin}")
    if pin > CONTRACT_VERSION:
        raise UnknownContractVersion(
            f"{where} pins contract version {pin}, but this suite checks version "
            f"{CONTRACT_VERSION}: upgrade mcp-tasks-contract"
        )
    return pin


def changes_since(pin: int) -> list[RuleChange]:
    """The changes a store pinned at ``pin`` was not written for, oldest first."""
    return [change for change in CHANGES if change.version > pin]


def newer_rules(pin: int | None) -> dict[str, RuleChange]:
    """Each rule changed after ``pin`` and its latest change; none without a pin."""
    if pin is None:
        return {}
    return {rule_id: change for change in changes_since(pin) for rule_id in change.rules}

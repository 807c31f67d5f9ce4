"""Every contract rule has a test, and every contract test names known rules (both directions)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import RULES, StatsContract, StoreContract
from mcp_tasks_contract.offers import BEHAVIOURS, Offers
from mcp_tasks_contract.rules import OPTIONAL

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def contract_tests(suite: type) -> dict[str, Callable[..., object]]:
    """The suite's test functions by name, as pytest collects them from a subclass."""
    return {
        name: member
        for name, member in inspect.getmembers(suite, callable)
        if name.startswith("test")
    }


def rule_ids(test: Callable[..., object]) -> list[str]:
    """The ids a test's ``@pytest.mark.rule(...)`` markers name."""
    marks = getattr(test, "pytestmark", [])
    return [str(rule_id) for mark in marks if mark.name == "rule" for rule_id in mark.args]


def coverage_problems(suite: type, rules: Mapping[str, str]) -> list[str]:
    """What breaks the mapping: a test without a rule, an unknown rule id, a rule without a test."""
    problems: list[str] = []
    proven: set[str] = set()
    for name, test in contract_tests(suite).items():
        ids = rule_ids(test)
        if not ids:
            problems.append(f"{name} names no rule")
        problems.extend(f"{name} names unknown rule {i}" for i in ids if i not in rules)
        proven.update(ids)
    problems.extend(f"rule {i} has no test" for i in rules if i not in proven)
    return problems


#: Optional behaviours proven by StatsContract (the ``stats()`` opt-in beside
#: StoreContract), not by StoreContract itself.
PROVEN_BESIDE = {"O-COUNTS"}


def test_every_rule_is_proven_and_every_test_names_known_rules() -> None:
    """The real suite: no rule or optional behaviour without a test, no test without a
    (known) rule; ``counts()`` is proven beside it, by StatsContract."""
    own = {i: what for i, what in OPTIONAL.items() if i not in PROVEN_BESIDE}
    assert coverage_problems(StoreContract, {**RULES, **own}) == []
    beside = {i for test in contract_tests(StatsContract).values() for i in rule_ids(test)}
    assert beside == PROVEN_BESIDE


def test_each_optional_behaviour_is_one_declaration_and_never_a_rule() -> None:
    """Every optional behaviour has one field of Offers and every field one behaviour; no
    contract rule is optional, and a test proves either rules or one optional behaviour."""
    assert sorted(BEHAVIOURS.values()) == sorted(OPTIONAL)
    assert set(Offers.__dataclass_fields__) == set(BEHAVIOURS)
    assert not set(OPTIONAL) & set(RULES)
    assert Offers().not_offered() == list(BEHAVIOURS.values())
    assert Offers(clock=True, notifier=True).not_offered() == [
        "O-NAMESPACES",
        "O-RESTART",
        "O-REWRITE",
        "O-COUNTS",
    ]
    for name, test in contract_tests(StoreContract).items():
        optional = [i for i in rule_ids(test) if i in OPTIONAL]
        assert optional == [] or rule_ids(test) == optional[:1], name


def test_every_contract_test_states_its_property() -> None:
    """Each contract test has a docstring stating the property it proves."""
    missing = [name for name, test in contract_tests(StoreContract).items() if not test.__doc__]
    assert missing == []


def test_contract_tests_are_not_parametrized() -> None:
    """One test function is one test item, so a run's count is the suite's size (see the
    third-party recipe test)."""
    for test in contract_tests(StoreContract).values():
        assert all(mark.name != "parametrize" for mark in getattr(test, "pytestmark", []))


def test_rule_ids_are_well_formed() -> None:
    """Ids are S-… or INV-…, each with a one-line statement."""
    for rule_id, statement in {**RULES, **OPTIONAL}.items():
        assert rule_id.startswith(("S-", "INV-", "O-"))
        assert statement
        assert "\n" not in statement


class _Suite:
    @pytest.mark.rule("S-A")
    def test_a(self) -> None:
        """Proves S-A."""

    @pytest.mark.rule("S-A", "S-NOPE")
    def test_unknown(self) -> None:
        """Names a rule that is not in the catalogue."""

    def test_untagged(self) -> None:
        """Names no rule at all."""


def test_the_check_reports_each_kind_of_gap() -> None:
    """A rule without a test, a test without a rule and an unknown id each fail the check."""
    problems = coverage_problems(_Suite, {"S-A": "a", "S-B": "b"})
    assert sorted(problems) == [
        "rule S-B has no test",
        "test_unknown names unknown rule S-NOPE",
        "test_untagged names no rule",
    ]

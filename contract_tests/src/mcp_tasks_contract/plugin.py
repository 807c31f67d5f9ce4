"""The pytest plugin (entry point ``pytest11``): the ``rule`` marker, the ``store_servers``
fixture (:mod:`mcp_tasks_contract.store_servers`), and a run that names the rules it broke.

Loaded by pytest itself, so a store author needs no pytest configuration, even with
``--strict-markers``. It also asks pytest to rewrite the suite's asserts, which must
happen before the suite is imported (hence the package's lazy ``__init__``).

A failed contract test names the rules it broke, each in the words of
``docs/store-contract.md``: in its failure report, in the ``FAILED`` line, at once as the
run goes on, and in a closing section with the command that runs it again. The rules are
the test's ``rule`` marker, or, when the failure knows better (a
:class:`~mcp_tasks_contract.verdicts.RuleBroken`: the stateful test), the ones it names.
``--contract-json FILE`` writes the run's rules: passed, failed, not offered.

A contract class may pin the contract version its store was written against
(``contract_version``; ``--contract-version N`` or the ``contract_version`` ini option
for the whole run): every rule is still checked, and the report says what is new since the
pin and marks each failure of a newer rule with what changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import pytest

from mcp_tasks_contract.offers import BEHAVIOURS, Offers
from mcp_tasks_contract.store_servers import store_servers
from mcp_tasks_contract.verdicts import RuleBroken, Verdicts, explain, rerun_command
from mcp_tasks_contract.versions import (
    CONTRACT_VERSION,
    UnknownContractVersion,
    changes_since,
    check_pin,
    newer_rules,
)

if TYPE_CHECKING:
    from collections.abc import Generator

pytest.register_assert_rewrite("mcp_tasks_contract.suite", "mcp_tasks_contract.population")

__all__ = ["store_servers"]  # a fixture of every test session that loads the plugin

#: The user property a contract test's report carries: the rule ids of its marker.
RULES_KEY: Final = "contract_rules"
#: The user property of a failed contract test's report: the rule ids it broke.
BROKEN_KEY: Final = "contract_rules_broken"
#: The user property of every contract test's report: what its class does not offer.
NOT_OFFERED_KEY: Final = "contract_not_offered"
#: The user property of every contract test's report: the contract version its class pins.
PIN_KEY: Final = "contract_version_pinned"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcp-tasks-contract", "mcp-tasks Store contract")
    group.addoption(
        "--contract-json",
        metavar="FILE",
        help="write the contract rules of this run (passed, failed, not offered) as JSON",
    )
    group.addoption(
        "--contract-stateful-examples",
        metavar="N",
        type=int,
        help="run the stateful test on N random sequences instead of the class's "
        "stateful_max_examples (more finds rarer bugs; a failure stops it early)",
    )
    group.addoption(
        "--contract-encrypted",
        action="store_true",
        help="run the suite on the store sealing the tasks' user data with a fresh key "
        "(mcp_tasks.stores.encrypted.EncryptedStore), as Tasks(encryption_keys=...) uses it",
    )
    group.addoption(
        "--contract-version",
        metavar="N",
        type=int,
        help=f"the contract version the store was written against (this suite checks "
        f"{CONTRACT_VERSION}): every rule is still checked; the report names what is new "
        "since N (overrides the class's contract_version)",
    )
    parser.addini(
        "contract_version",
        "the contract version the stores of this project were written against (below a "
        "class's contract_version and --contract-version)",
    )
    group.addoption(
        "--contract-rerun",
        metavar="TEMPLATE",
        default="pytest {nodeid}",
        help="the command that runs one failed test again ({nodeid}, {name}); default: %(default)s",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rule(*ids): the Store contract rule ids (mcp_tasks_contract.rules.RULES) a test proves",
    )
    config.pluginmanager.register(ContractRun(config), "mcp_tasks_contract_run")


def pinned_version(item: pytest.Item) -> int | None:
    """The contract version the item's store pins: ``--contract-version``, else its contract
    class's ``contract_version``, else the ``contract_version`` ini option; ``None``: none.

    Raises:
        pytest.UsageError: a pin this suite does not know (below 1, or newer than it).
    """
    config = item.config
    cls = item.cls if isinstance(item, pytest.Function) else None
    option = config.getoption("contract_version", None)
    declared = getattr(cls, "contract_version", None)
    ini = str(config.getini("contract_version") or "").strip()
    try:
        if option is not None:
            return check_pin(int(option), "--contract-version")
        if isinstance(declared, int) and cls is not None:
            return check_pin(declared, f"{cls.__name__}.contract_version")
        if ini:
            if not ini.isdigit():
                raise UnknownContractVersion(
                    f"the contract_version ini option {ini!r} is no number"
                )
            return check_pin(int(ini), "the contract_version ini option")
    except UnknownContractVersion as error:
        raise pytest.UsageError(str(error)) from None
    return None


def marked_rules(item: pytest.Item) -> list[str]:
    """The rule ids of an item's ``rule`` markers."""
    return [str(rule_id) for mark in item.iter_markers("rule") for rule_id in mark.args]


def not_offered(item: pytest.Item) -> dict[str, str]:
    """The optional behaviours the item's contract class does not offer, and where that is
    declared."""
    cls = item.cls if isinstance(item, pytest.Function) else None
    offers = getattr(cls, "offers", None)
    if cls is None or not isinstance(offers, Offers):
        return {}
    owner = cls.__name__
    lacking = {BEHAVIOURS[name]: name for name in BEHAVIOURS if not getattr(offers, name)}
    return {rule_id: f"{owner}.offers.{name} is False" for rule_id, name in lacking.items()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of optional behaviours the store does not offer are not run (deselected,
    never skipped: a declaration is not a failure to run); the run reports them."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if marked_rules(item):
            pinned_version(item)  # a pin the suite cannot honour stops the run before it starts
        lacking = not_offered(item)
        (dropped if set(marked_rules(item)) & set(lacking) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A contract test's report carries its rules; a failed call's, the rules it broke,
    first in its report and in its ``FAILED`` line."""
    report = yield
    rules = marked_rules(item)
    if not rules:
        return report
    pin = pinned_version(item)
    report.user_properties.append((RULES_KEY, rules))
    report.user_properties.append((NOT_OFFERED_KEY, not_offered(item)))
    report.user_properties.append((PIN_KEY, pin))
    if report.when == "call" and report.failed:
        error = call.excinfo.value if call.excinfo is not None else None
        broken = named_rules(error) or rules
        report.user_properties.append((BROKEN_KEY, broken))
        newer = newer_rules(pin)
        lines = [explain(rule_id) for rule_id in broken]
        lines += [
            new_since_pin(rule_id, newer[rule_id].version, pin, newer[rule_id].what)
            for rule_id in broken
            if rule_id in newer and pin is not None
        ]
        report.sections.insert(0, ("Store contract rules broken", "\n".join(lines)))
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            crash.message = f"[{' '.join(broken)}] {crash.message}"
    return report


def new_since_pin(rule_id: str, version: int, pin: int, what: str) -> str:
    """The line that marks a rule newer than the store's pin, with what changed."""
    return f"{rule_id} is new in contract version {version}, after this store's pin {pin}: {what}"


def named_rules(error: BaseException | None) -> list[str]:
    """The rules a failure names itself: a :class:`RuleBroken`'s, or every one of a group
    whose failures all name theirs (Hypothesis may report several distinct failures)."""
    if isinstance(error, RuleBroken):
        return list(error.rules)
    if isinstance(error, BaseExceptionGroup):
        named = [named_rules(inner) for inner in error.exceptions]
        if all(named):
            return list(dict.fromkeys(rule_id for rules in named for rule_id in rules))
    return []


class ContractRun:
    """The rules of one run (on the controller under xdist, where every report arrives),
    per store (a contract class: ``path::TestClass``): announced as they break, summed up
    at the end, written to ``--contract-json``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.stores: dict[str, Verdicts] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if RULES_KEY not in properties:
            return
        rules = cast("list[str]", properties[RULES_KEY])
        verdicts = self.stores.setdefault(report.nodeid.rpartition("::")[0], Verdicts())
        verdicts.not_offered.update(cast("dict[str, str]", properties[NOT_OFFERED_KEY]))
        verdicts.pinned = cast("int | None", properties.get(PIN_KEY))
        if report.failed:
            broken = cast("list[str]", properties.get(BROKEN_KEY, []))
            verdicts.broke(report.nodeid, broken, rules)
            if broken:
                self.announce(f"contract rule broken: {' '.join(broken)} ({report.nodeid})")
        elif report.when == "call" and report.passed:
            verdicts.ran(report.nodeid, rules)

    def announce(self, line: str) -> None:
        """A line on the terminal, between tests."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(line)

    def announce_now(self, line: str) -> None:
        """A line on the terminal from inside a running test (output capture paused)."""
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            self.announce(line)
            return
        with capture.global_and_fixture_disabled():
            self.announce(line)

    def rerun_template(self) -> str:
        template = str(self.config.getoption("contract_rerun"))
        seed = self.config.getoption("hypothesis_seed", None)
        if seed is not None and "--hypothesis-seed" not in template:
            template += f" --hypothesis-seed={seed}"
        return template

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.stores:
            return
        write = terminalreporter.write_line
        terminalreporter.section("Store contract")
        for store, verdicts in self.stores.items():
            if len(self.stores) > 1:
                write(f"{store}:")
            pin = verdicts.pinned
            newer = newer_rules(pin)
            for rule_id, nodeids in verdicts.failed.items():
                write(f"FAILED {explain(rule_id)}")
                if rule_id in newer and pin is not None:
                    change = newer[rule_id]
                    write(f"    {new_since_pin(rule_id, change.version, pin, change.what)}")
                for nodeid in dict.fromkeys(nodeids):
                    write(f"    reproduce: {rerun_command(self.rerun_template(), nodeid)}")
            write(f"{len(verdicts.passed())} rules passed, {len(verdicts.failed)} failed")
            for rule_id, reason in verdicts.not_offered.items():
                write(f"not offered: {rule_id} ({reason})")
            if pin is not None and pin < CONTRACT_VERSION:
                write(f"contract version {CONTRACT_VERSION}; this store pins {pin}; new since:")
                for change in changes_since(pin):
                    rules = " ".join(change.rules) or "the optional stats() (StatsContract)"
                    write(f"    {rules} (version {change.version}): {change.what}")

    def pytest_sessionfinish(self) -> None:
        """The report of the run's one store; of several, one report per store."""
        target = self.config.getoption("contract_json")
        if not target:
            return
        reports = {store: v.report(self.rerun_template()) for store, v in self.stores.items()}
        single = next(iter(reports.values())) if len(reports) == 1 else {"stores": reports}
        Path(str(target)).write_text(json.dumps(single, indent=2) + "\n", encoding="utf-8")

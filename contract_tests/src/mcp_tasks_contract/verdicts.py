"""What a contract run says about each rule: which test broke it, in the doc's words, and
what a store author publishes (rules passed, failed, not offered)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from mcp_tasks_contract.rule_text import RULE_TEXT
from mcp_tasks_contract.rules import OPTIONAL, RULES
from mcp_tasks_contract.versions import CONTRACT_VERSION, changes_since, newer_rules

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: Where every rule is stated in full.
CONTRACT_DOC: Final = "docs/store-contract.md"


class RuleBroken(AssertionError):
    """A failed check that knows which rules it proves (the stateful test's divergences and
    invariants): the run reports these rules, not every rule of the test's marker."""

    def __init__(self, rules: Sequence[str], message: str) -> None:
        super().__init__(message)
        self.rules = tuple(rules)


def explain(rule_id: str) -> str:
    """The rule as the doc states it: ``S-PUT.4 (docs/store-contract.md): Terminal tasks are
    final: A completed, failed or cancelled task never changes again.``"""
    text = RULE_TEXT.get(rule_id) or OPTIONAL.get(rule_id) or RULES.get(rule_id, "unknown rule")
    return f"{rule_id} ({CONTRACT_DOC}): {text}"


@dataclass
class Verdicts:
    """The rules of a run, gathered from its test reports (on the controller under xdist)."""

    proven_by: dict[str, list[str]] = field(default_factory=dict)
    """Each rule id, the node ids of the tests that ran for it."""
    failed: dict[str, list[str]] = field(default_factory=dict)
    """Each broken rule id, the node ids of the tests that broke it."""
    not_offered: dict[str, str] = field(default_factory=dict)
    """Each optional behaviour the store declares it lacks, and how it declared that."""
    unproven: set[str] = field(default_factory=set)
    """Rules of tests that failed on another rule or could not run (setup errors)."""
    pinned: int | None = None
    """The contract version the store pins, if any."""

    def ran(self, nodeid: str, rules: Iterable[str]) -> None:
        for rule_id in rules:
            self.proven_by.setdefault(rule_id, []).append(nodeid)

    def broke(self, nodeid: str, rules: Iterable[str], covered: Iterable[str]) -> None:
        for rule_id in rules:
            self.failed.setdefault(rule_id, []).append(nodeid)
        self.unproven.update(covered)

    def passed(self) -> list[str]:
        return [
            rule_id
            for rule_id in (*RULES, *OPTIONAL)
            if rule_id in self.proven_by
            and rule_id not in self.failed
            and rule_id not in self.unproven
            and rule_id not in self.not_offered
        ]

    def report(self, rerun: str) -> dict[str, object]:
        """The machine-readable report (``--contract-json``, ``mcp-tasks contract --json``);
        ``rerun`` is the template of the command that runs one test again."""
        failed = [r for r in (*RULES, *OPTIONAL) if r in self.failed]
        ran = set(self.proven_by) | set(self.failed) | self.unproven
        newer = newer_rules(self.pinned)
        return {
            "contract_version": CONTRACT_VERSION,
            "pinned_version": self.pinned,
            "new_since_pin": [
                {"version": c.version, "rules": list(c.rules), "what": c.what}
                for c in (changes_since(self.pinned) if self.pinned is not None else [])
            ],
            "passed": self.passed(),
            "failed": {
                r: {
                    "statement": explain(r),
                    "reproduce": [rerun_command(rerun, n) for n in dict.fromkeys(self.failed[r])],
                    **({"new_in_version": newer[r].version} if r in newer else {}),
                }
                for r in failed
            },
            "not_offered": dict(self.not_offered),
            "not_proven": sorted(r for r in ran if r not in self.failed and r not in self.passed()),
            "not_run": [r for r in RULES if r not in ran],
        }


def rerun_command(template: str, nodeid: str) -> str:
    """The command that runs one test again: ``template`` with ``{nodeid}`` (pytest's id)
    and ``{name}`` (the test function's name) filled in, each shell-quoted."""
    name = nodeid.rpartition("::")[2]
    return template.format(nodeid=shlex.quote(nodeid), name=shlex.quote(name))

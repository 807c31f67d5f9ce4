"""The contract version: what each version changed is stated once (versions.CHANGES), told to
store authors in the CHANGELOG and docs/store-contract.md, and a store that pins an older
version still has every rule checked, with each failure of a newer rule marked as such."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from third_party_store import planted, run_python

from mcp_tasks_contract import CONTRACT_VERSION, RULES
from mcp_tasks_contract.versions import CHANGES, changes_since, newer_rules

REPO = Path(__file__).resolve().parents[3]
MINIMAL_STORE = REPO / "examples" / "minimal_store.py"
CHANGELOG = REPO / "CHANGELOG.md"
CONTRACT_DOC = REPO / "docs" / "store-contract.md"

#: A store written against version 2: its claim takes any type, whatever work_types asks.
CLAIMS_ANY_TYPE = (
    "if rules.claimable(record, now) and rules.of_work_types(record, work_types):",
    "if rules.claimable(record, now):",
)

TEST_MODULE = """
import pytest
from mcp_tasks_contract import Offers, StoreContract

from minimal_store import Database, DictTaskStore


class TestDictStore(StoreContract):
    offers = Offers(clock=True)
    contract_version = 2

    @pytest.fixture
    def store(self, store_clock):
        databases = {}

        async def open_store(namespace, options):
            database = databases.setdefault(namespace, Database())
            return DictTaskStore(database, options, store_clock)

        return open_store
"""


def test_every_change_names_known_rules_in_version_order() -> None:
    """Changes are listed oldest first, each at a version from 2 to CONTRACT_VERSION, naming
    rules of the catalogue; the latest change is the current version (it goes up with one)."""
    versions = [change.version for change in CHANGES]
    assert versions == sorted(versions)
    assert min(versions) >= 2
    assert max(versions) == CONTRACT_VERSION
    assert {rule for change in CHANGES for rule in change.rules} <= RULES.keys()


def test_newer_rules_are_those_changed_after_the_pin() -> None:
    """A pin at the current version has nothing new; at 1, every changed rule is; no pin
    marks nothing."""
    assert changes_since(CONTRACT_VERSION) == []
    assert newer_rules(None) == {}
    assert set(newer_rules(1)) == {rule for change in CHANGES for rule in change.rules}
    assert set(newer_rules(2)) == {
        rule for change in CHANGES if change.version > 2 for rule in change.rules
    }


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^#{1,4} ", text[start + len(heading) :], re.MULTILINE)
    return text[start : start + len(heading) + (following.start() if following else len(text))]


def test_the_changelog_tells_store_authors_every_change() -> None:
    """The changelog's "For store authors" part states the current version and names every
    rule each version changed."""
    part = _section(CHANGELOG.read_text(encoding="utf-8"), "### For store authors")
    assert f"contract version {CONTRACT_VERSION}" in " ".join(part.split())
    for change in CHANGES:
        for rule in change.rules:
            assert f"`{rule}`" in part, rule


def test_the_contract_page_lists_every_version() -> None:
    """docs/store-contract.md's "Contract versions" table has one row per version with the
    rules it changed."""
    part = _section(CONTRACT_DOC.read_text(encoding="utf-8"), "## Contract versions")
    assert f"`mcp_tasks_contract.CONTRACT_VERSION` is {CONTRACT_VERSION}." in " ".join(part.split())
    for version in range(1, CONTRACT_VERSION + 1):
        row = re.search(rf"^\| {version} \|.*$", part, re.MULTILINE)
        assert row is not None, version
        for change in CHANGES:
            if change.version == version:
                for rule in change.rules:
                    assert f"`{rule}`" in row.group(0), (version, rule)


@pytest.mark.slow
def test_a_store_pinned_before_a_rule_still_fails_it_marked_as_new(tmp_path: Path) -> None:
    """The minimal store with claims that ignore work_types, pinned at version 2: the
    S-CLAIM.4 tests still run and fail; the failure report, the closing section and the
    JSON report say the rule is new in version 3, after the pin, and what changed; the
    rules the pin already covered are not marked, failed or passed."""
    source = MINIMAL_STORE.read_text(encoding="utf-8")
    (tmp_path / "minimal_store.py").write_text(planted(source, CLAIMS_ANY_TYPE), encoding="utf-8")
    (tmp_path / "test_dict_store.py").write_text(textwrap.dedent(TEST_MODULE))
    completed = run_python(
        tmp_path,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers", "-W", "error"),
        *("-k", "claim", "--contract-json=rules.json", "test_dict_store.py"),
        timeout=300,
    )
    out = completed.stdout
    assert completed.returncode == 1, out[-4000:] + completed.stderr[-2000:]
    (claim_types,) = [change for change in CHANGES if "S-CLAIM.4" in change.rules]
    marked = f"S-CLAIM.4 is new in contract version 3, after this store's pin 2: {claim_types.what}"
    assert marked in out
    assert f"contract version {CONTRACT_VERSION}; this store pins 2; new since:" in out
    assert f"    S-CLAIM.4 (version 3): {claim_types.what}" in out
    rules = json.loads((tmp_path / "rules.json").read_text())
    assert (rules["contract_version"], rules["pinned_version"]) == (CONTRACT_VERSION, 2)
    assert rules["failed"]["S-CLAIM.4"]["new_in_version"] == 3
    # A test of S-CLAIM.4 and S-REAP names both; S-REAP is as old as the pin: not marked.
    assert set(rules["failed"]) == {"S-CLAIM.4", "S-REAP"}
    assert "new_in_version" not in rules["failed"]["S-REAP"]
    assert "S-REAP is new" not in out
    assert [c["version"] for c in rules["new_since_pin"]] == [
        c.version for c in CHANGES if c.version > 2
    ]
    assert {"S-CLAIM.1", "S-CLAIM.2"} <= set(rules["passed"])


@pytest.mark.slow
def test_a_pin_newer_than_the_suite_stops_the_run(tmp_path: Path) -> None:
    """A store pinned at a version this suite does not check yet: a usage error naming the
    upgrade, before any test runs."""
    (tmp_path / "minimal_store.py").write_text(MINIMAL_STORE.read_text(encoding="utf-8"))
    (tmp_path / "test_dict_store.py").write_text(textwrap.dedent(TEST_MODULE))
    completed = run_python(
        tmp_path,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "test_dict_store.py"),
        f"--contract-version={CONTRACT_VERSION + 1}",
        timeout=120,
    )
    assert completed.returncode == 4, completed.stdout[-2000:] + completed.stderr[-2000:]
    expected = (
        f"--contract-version pins contract version {CONTRACT_VERSION + 1}, but this suite "
        f"checks version {CONTRACT_VERSION}: upgrade mcp-tasks-contract"
    )
    assert expected in completed.stderr + completed.stdout
    assert " passed" not in completed.stdout

"""The README recipe works for a third party: the worked minimal store of the guide
(examples/minimal_store.py), copied to a scratch directory, one class, one fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from mcp_tasks_contract import RULES, StoreContract
from mcp_tasks_contract.offers import Offers

#: The guide's worked example, in the repository above this file.
MINIMAL_STORE = Path(__file__).resolve().parents[3] / "examples" / "minimal_store.py"

TEST_MODULE = """
import pytest
from mcp_tasks_contract import Offers, StoreContract

from minimal_store import Database, DictTaskStore


class TestDictStore(StoreContract):
    offers = Offers(clock=True)

    @pytest.fixture
    def store(self, store_clock):
        databases = {}

        async def open_store(namespace, options):
            database = databases.setdefault(namespace, Database())
            return DictTaskStore(database, options, store_clock)

        return open_store
"""


def clean_environment() -> dict[str, str]:
    """This process's environment without what would steer the child pytest."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_the_minimal_store_passes_the_whole_suite(tmp_path: Path) -> None:
    """In a directory with no pytest configuration, the guide's minimal store and a subclass
    of StoreContract that overrides `store` and declares `offers` run every contract test
    under --strict-markers and -W error: all pass, none skip; the tests of the behaviours it
    does not offer are left out, and the report lists every rule passed and those not
    offered."""
    shutil.copy(MINIMAL_STORE, tmp_path / "minimal_store.py")
    (tmp_path / "test_dict_store.py").write_text(textwrap.dedent(TEST_MODULE))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "-W",
            "error",
            "--junit-xml=report.xml",
            "--contract-json=rules.json",
            "test_dict_store.py",
        ],
        cwd=tmp_path,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    suite = ET.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert suite is not None
    expected = sum(1 for name in dir(StoreContract) if name.startswith("test"))
    assert expected >= 45
    not_offered = Offers(clock=True).not_offered()
    counts = {key: int(suite.get(key, "-1")) for key in ("tests", "failures", "errors", "skipped")}
    ran = expected - len(not_offered)
    assert counts == {"tests": ran, "failures": 0, "errors": 0, "skipped": 0}
    assert f"{ran} passed, {len(not_offered)} deselected" in completed.stdout
    for rule_id, field in (("O-NAMESPACES", "namespaces"), ("O-NOTIFIER", "notifier")):
        assert f"not offered: {rule_id} (TestDictStore.offers.{field} is False)" in completed.stdout
    rules = json.loads((tmp_path / "rules.json").read_text())
    assert rules["passed"] == [*RULES, "O-CLOCK"]
    assert (rules["failed"], rules["not_proven"], rules["not_run"]) == ({}, [], [])
    assert sorted(rules["not_offered"]) == sorted(not_offered)

"""A third party's store set up outside this repository's pytest configuration: the guide's
minimal store with a planted bug, the factory module `mcp-tasks contract` opens it by, and
a Python run in that folder. Shared by test_third_party and tests/docs'
test_store_contract_page (which loads this file by its path)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

#: `mcp-tasks contract factory:open_store` opens the copied store on the suite's clock.
FACTORY_MODULE = """
from mcp_tasks import system_clock
from mcp_tasks_contract import Offers

from minimal_store import Database, DictTaskStore


class OpenStore:
    offers = Offers(clock=True)

    def __init__(self):
        self.databases = {}

    async def __call__(self, namespace, options, *, clock=system_clock):
        return DictTaskStore(self.databases.setdefault(namespace, Database()), options, clock)


open_store = OpenStore()
"""

#: A finished task may change: the read-modify-write sees every terminal task as working.
FINISHED_MAY_CHANGE = (
    "        transition, record = compute(tasks.get(task_id), self._clock())\n",
    "        found = tasks.get(task_id)\n"
    "        if found is not None and found.status.is_terminal:\n"
    "            import dataclasses\n"
    "            from mcp_tasks import TaskStatus\n"
    "            found = dataclasses.replace(found, status=TaskStatus.WORKING)\n"
    "        transition, record = compute(found, self._clock())\n",
)


def planted(source: str, plant: tuple[str, str]) -> str:
    """The minimal store's ``source`` with ``plant`` (its line, the buggy lines) in it."""
    original, bug = plant
    assert source.count(original) == 1, "the minimal store changed: update the plant"
    return source.replace(original, bug)


def child_environment() -> dict[str, str]:
    """This process's environment but for what would steer the child's pytest."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_python(folder: Path, *arguments: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python ARGUMENTS`` in ``folder``, in :func:`child_environment`."""
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=folder,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

"""The README recipe works for a third party: a scratch directory, one class, one fixture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from mcp_tasks_contract import StoreContract

if TYPE_CHECKING:
    from pathlib import Path

# A store that is nobody's class but its own: it only has to satisfy the Store protocol.
STORE_MODULE = '''
"""A third-party store: delegates to the memory store, without subclassing anything."""

from mcp_tasks import MemoryBackend, MemoryTaskStore, StoreOptions


class AcmeTaskStore:
    def __init__(self, backend: MemoryBackend, options: StoreOptions) -> None:
        self._inner = MemoryTaskStore(options, backend=backend)

    async def create(self, task):
        return await self._inner.create(task)

    async def get(self, task_id, owner):
        return await self._inner.get(task_id, owner)

    async def update(self, task_id, owner, input_responses):
        return await self._inner.update(task_id, owner, input_responses)

    async def cancel(self, task_id, owner):
        return await self._inner.cancel(task_id, owner)

    async def put_status(
        self, task_id, change, *, lease=None, expected_revision=None, event_id=None
    ):
        return await self._inner.put_status(
            task_id, change, lease=lease, expected_revision=expected_revision, event_id=event_id
        )

    async def claim(self, worker_id, *, lease_ms, task_id=None):
        return await self._inner.claim(worker_id, lease_ms=lease_ms, task_id=task_id)

    async def renew(self, lease, *, lease_ms):
        return await self._inner.renew(lease, lease_ms=lease_ms)

    async def release(self, lease):
        await self._inner.release(lease)

    async def reap(self, *, limit=500):
        return await self._inner.reap(limit=limit)

    async def close(self):
        await self._inner.close()
'''

TEST_MODULE = """
import pytest
from mcp_tasks import MemoryBackend, StoreOptions
from mcp_tasks_contract import StoreContract

from acme_store import AcmeTaskStore


class TestAcmeStore(StoreContract):
    stateful_max_examples = 5

    @pytest.fixture
    async def store(self):
        servers = {}

        async def open_store(namespace: str, options: StoreOptions):
            return AcmeTaskStore(servers.setdefault(namespace, MemoryBackend()), options)

        yield open_store
        servers.clear()
"""


def test_a_third_party_store_runs_the_whole_suite(tmp_path: Path) -> None:
    """In a directory with no pytest configuration, subclassing StoreContract and overriding
    `store` runs every contract test under --strict-markers and -W error: all pass, none skip."""
    (tmp_path / "acme_store.py").write_text(textwrap.dedent(STORE_MODULE))
    (tmp_path / "test_acme_store.py").write_text(textwrap.dedent(TEST_MODULE))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
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
            "test_acme_store.py",
        ],
        cwd=tmp_path,
        env=env,
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
    counts = {key: int(suite.get(key, "-1")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": expected, "failures": 0, "errors": 0, "skipped": 0}

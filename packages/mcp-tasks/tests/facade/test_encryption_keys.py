"""``Tasks(encryption_keys=…)`` and ``$MCP_TASKS_ENCRYPTION_KEYS``: a served task's data is
sealed in the store, read back plain on the wire, and the store's abilities stay visible."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import RelayNotifier, TaskContext, Tasks
from mcp_tasks.cli import main
from mcp_tasks.runtime.notifier import notifier_for
from mcp_tasks.stores.abilities import InFile, Rewrites, StatsReader
from mcp_tasks.stores.encrypted import KEYS_ENV, EncryptedStore, new_key
from mcp_tasks.stores.observed import ObservedStore, unobserved
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
SECRET_ARG = "patient-7731-plain"
SECRET_RESULT = "diagnosis-5512-plain"


def build(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "sealed", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def lookup(who: str, ctx: TaskContext) -> str:
        await ctx.progress(1, 2, f"looking up {who}")
        return f"{SECRET_RESULT} for {who}"

    return mcp


async def test_a_served_task_is_sealed_in_the_store_and_plain_on_the_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``$MCP_TASKS_ENCRYPTION_KEYS`` set, ``Tasks(store=sqlite)`` seals: the file holds
    neither the argument nor the result, ``tasks/get`` answers both plain, and the store's
    abilities (its file, stats, rewrites, its notifier) are still asked of the store."""
    monkeypatch.setenv(KEYS_ENV, f"app:{new_key()}")
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    tasks = Tasks(store=store, close_store=True)
    assert tasks.encryption_keys is not None
    assert tasks.encryption_keys.key_ids == ("app",)
    assert isinstance(tasks.observed_store, ObservedStore)
    assert isinstance(tasks.observed_store.inner, EncryptedStore)
    inner = unobserved(tasks.observed_store)
    assert inner is store
    assert isinstance(inner, InFile)
    assert isinstance(inner, StatsReader)
    assert isinstance(inner, Rewrites)
    assert isinstance(notifier_for(tasks.observed_store), RelayNotifier)
    async with (
        running_asgi(build(tasks).streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        raw = RawClient(http, url)
        params = {"name": "lookup", "arguments": {"who": SECRET_ARG}}
        task_id = (await raw.call("tools/call", params, capabilities=CAPS))["result"]["taskId"]
        with anyio.fail_after(10):
            while True:
                got = await raw.call("tasks/get", {"taskId": task_id}, capabilities=CAPS)
                if got["result"]["status"] == "completed":
                    break
                await anyio.sleep(0.02)
    text = got["result"]["result"]["content"][0]["text"]
    assert text == f"{SECRET_RESULT} for {SECRET_ARG}"
    with closing(sqlite3.connect(path)) as conn:
        held = repr(conn.execute("SELECT * FROM tasks").fetchall())
    assert "lookup" in held  # the tool name stays plain: claims select on it
    assert SECRET_ARG not in held
    assert SECRET_RESULT not in held


def test_no_keys_no_wrapper_and_a_bad_keys_file_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without keys the store is observed bare; ``serve --encryption-keys-file`` with a file
    of no key is exit 2, and the message holds no key."""
    monkeypatch.delenv(KEYS_ENV, raising=False)
    tasks = Tasks()
    assert tasks.encryption_keys is None
    assert isinstance(tasks.observed_store, ObservedStore)
    assert tasks.observed_store.inner is tasks.store
    bad = tmp_path / "keys"
    bad.write_text("k1:not-a-key!\n")
    assert main(["serve", "--encryption-keys-file", str(bad), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--encryption-keys-file" in err
    assert "not-a-key" not in err

"""A store blip as an operator meets it: a real ``mcp-tasks serve APP --store URL`` whose store
(Postgres, Redis, MongoDB on the embedded SecantusDB server) is reached through a TCP proxy
the test closes for 5 s (every connection dropped, new ones refused) and opens again, while a
real ``mcp-tasks call URL TOOL --reconnect-for 60`` follows a body that reports progress every
0.5 s. The CLI exits 0 with the result, the body starts once, and the server says the outage
in at most ten lines, without a traceback, naming the store it serves.

SQLite is not here: it is a file the server opens, with no connection to cut
(``test_store_blip.py`` says how its outage is tested).
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import pytest
from conftest import processes_of
from test_store_blip import BLIP_S, through

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks.stores.opening import describe_store, store_from_url
from mcp_tasks_contract.proxy import StoppableProxy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: Generous: only there so that a broken build fails instead of hanging.
DEADLINE_S = 90
#: The most lines the server may log from the outage's start on.
MOST_LINES = 10
MCP_TASKS = (sys.executable, "-m", "mcp_tasks.cli")
PROGRESS = re.compile(r"ticking \(\d+/\d+\)")


@pytest.fixture(params=["postgres", "redis", "mongodb"])
async def proxied(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, StoppableProxy]]:
    """A fresh namespace of the store ``request.param`` names, its URL through a proxy."""
    server = request.getfixturevalue(f"{request.param}_url")
    namespace = "opblip_" + secrets.token_hex(6)
    try:
        async with StoppableProxy.to(server) as proxy:
            yield namespaced_url(through(server, proxy), namespace), proxy
    finally:
        await drop_namespace(namespaced_url(server, namespace))


def store_named(url: str) -> str:
    """How the server names the store at ``url`` in its log (password masked)."""
    return describe_store(store_from_url(url))


CALLS = pytest.mark.parametrize(
    ("tool", "answers", "printed"),
    [
        ("ticker", [], "ticked"),
        ("asker", ["--answer", 'go={"go": true}'], "ticked after accept: {'go': True}"),
    ],
)


@CALLS
async def test_a_store_blip_under_a_call_changes_nothing_the_operator_sees(
    proxied: tuple[str, StoppableProxy], tmp_path: Path, tool: str, answers: list[str], printed: str
) -> None:
    """The store goes away for 5 s once the CLI has shown the first progress (the asker's
    question is asked while it is away) and comes back: the CLI exits 0 with the result,
    the body started once, and from the outage's start on the server logged at most ten
    lines, none a traceback, each that names a store naming the proxied one."""
    url, proxy = proxied
    await blip_under_a_call(url, proxy, tmp_path, tool, answers, printed)


async def blip_under_a_call(
    url: str,
    proxy: StoppableProxy,
    tmp_path: Path,
    tool: str,
    answers: list[str],
    printed: str,
    *,
    prefix: Sequence[str] = (),
    host: str = "127.0.0.1",
) -> None:
    """The scenario above, the server run behind ``prefix`` (``ip netns exec NAME``: another
    host) bound to ``host``, on the store at ``url`` whose path to its server ``proxy`` cuts."""
    name = store_named(url)
    async with processes_of(url, tmp_path / "runs.log") as processes:
        processes.prefix = list(prefix)
        server = await processes.start(
            [*MCP_TASKS, "serve", "blip_app:mcp", "--store", url, "--port", "0", "--host", host]
        )
        assert server.url is not None
        cli_err: list[str] = []
        progress_seen = anyio.Event()
        with anyio.fail_after(DEADLINE_S):
            async with await anyio.open_process(
                [*MCP_TASKS, "call", server.url, tool, *answers, "--reconnect-for", "60"],
                stdin=subprocess.DEVNULL,
            ) as cli:
                assert cli.stdout is not None
                assert cli.stderr is not None
                stdout, stderr = cli.stdout, cli.stderr

                async def read_err() -> None:
                    buffer = b""
                    async for chunk in stderr:
                        buffer += chunk
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            cli_err.append(line.decode(errors="replace"))
                            if PROGRESS.search(cli_err[-1]):
                                progress_seen.set()

                out = b""
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read_err)
                    await progress_seen.wait()
                    outage_from = len(server.output)
                    await proxy.stop("refused")
                    await anyio.sleep(BLIP_S)
                    await proxy.resume()
                    async for chunk in stdout:
                        out += chunk
                    await cli.wait()
        logged = server.output[outage_from:]
    err = "\n".join(cli_err)
    assert cli.returncode == 0, err
    assert out.decode() == printed + "\n", err
    runs = processes.lines("run")
    assert len(runs) == 1, runs
    text = "\n".join(logged)
    assert len(logged) <= MOST_LINES, text
    assert "Traceback" not in text, text
    naming = [line for line in logged if "the task store " in line]
    assert naming, text
    # The name the lines must carry is the URL the server was given (its proxy, or the
    # forwarder another host reaches it by), not the store's own server.
    reached = urlsplit(url)
    assert f"{reached.hostname}:{reached.port}" in name, name
    for line in naming:
        assert f"the task store {name} " in line, line

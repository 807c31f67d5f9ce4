"""A store on another host: the operator's store blip again (test_operator_blip.py), with
``mcp-tasks serve`` in a network namespace of its own reaching Postgres and Redis over a
delayed link (remote_host.py) whose far end the test cuts for 5 s, and the CLI reaching the
server over it too. Same invariants as on loopback. Needs root: skipped without it, failed
in CI."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import pytest
from remote_host import RemoteHost, forwarded, remote
from test_operator_blip import CALLS, blip_under_a_call
from test_store_blip import through

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks_contract.proxy import StoppableProxy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

__all__ = ["remote"]


@pytest.fixture(params=["postgres", "redis"])
async def far_proxied(
    request: pytest.FixtureRequest, remote: RemoteHost
) -> AsyncIterator[tuple[str, StoppableProxy]]:
    """A fresh namespace of the store ``request.param`` names, as the other host reaches
    it: through the link's forwarder, then a proxy the test closes (the store's side)."""
    server = request.getfixturevalue(f"{request.param}_url")
    namespace = "rblip_" + secrets.token_hex(6)
    try:
        async with (
            StoppableProxy.to(server) as proxy,
            forwarded(namespaced_url(through(server, proxy), namespace), remote) as far,
        ):
            yield far, proxy
    finally:
        await drop_namespace(namespaced_url(server, namespace))


@CALLS
async def test_a_store_blip_seen_from_another_host_changes_nothing_the_operator_sees(
    far_proxied: tuple[str, StoppableProxy],
    remote: RemoteHost,
    tmp_path: Path,
    tool: str,
    answers: list[str],
    printed: str,
) -> None:
    """As on loopback: the CLI exits 0 with the result, the body started once, and the
    server logged at most ten lines from the outage on, none a traceback, naming its store."""
    url, proxy = far_proxied
    await blip_under_a_call(
        url, proxy, tmp_path, tool, answers, printed, prefix=remote.command(), host=remote.address
    )

"""A ``subscriptions/listen`` stream outlives no token: opened with a bearer token, it ends
with its graceful result when the token expires, or when the server's verifier, asked
again, refuses it (revoked); the client listens again with a fresh token and hears the rest.
Over real HTTP with the SDK's auth (``MCPServer``) and FastMCP's, on memory and SQLite."""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from fastmcp import FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from fastmcp.utilities.tasks import TaskConfig
from mcp.server.mcpserver import MCPServer

from mcp_tasks import ServingOptions, Tasks
from mcp_tasks.testing import MessageStream, RawClient, StaticTokens, running, static_auth

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: How often the tests' servers ask their verifier again.
RECHECK_S = 0.2


class Server:
    """A server whose one task tool waits for :attr:`release`, and its tokens: ``alice``
    and ``alice-2``, one principal's; :meth:`add_expiring` adds one of hers that expires."""

    def __init__(self, kind: str, tasks: Tasks) -> None:
        self.kind = kind
        self.release = anyio.Event()
        if kind == "fastmcp":
            self.fastmcp_tokens: dict[str, dict[str, Any]] = {
                token: {"client_id": "test-client", "sub": "alice"}
                for token in ("alice", "alice-2")
            }
            mcp = FastMCP("authority", auth=StaticTokenVerifier(self.fastmcp_tokens))
            mcp.add_extension(tasks.fastmcp_extension())

            @mcp.tool(task=TaskConfig(mode="required"))
            async def held() -> str:
                await self.release.wait()
                return "released"

            self.app: object = mcp
        else:
            self.tokens = StaticTokens(subjects={"alice": "alice", "alice-2": "alice"})
            sdk: MCPServer[Any] = MCPServer(
                "authority",
                extensions=[tasks.extension()],
                lifespan=tasks.lifespan,
                **static_auth(verifier=self.tokens),
            )

            @tasks.tool(sdk, mode="required")
            async def held() -> str:
                await self.release.wait()
                return "released"

            self.app = sdk

    def add_expiring(self, token: str, expires_at: int) -> None:
        if self.kind == "fastmcp":
            self.fastmcp_tokens[token] = {
                "client_id": "test-client",
                "sub": "alice",
                "expires_at": expires_at,
            }
        else:
            self.tokens.tokens.add(token)
            self.tokens.subjects[token] = "alice"
            self.tokens.expires_at[token] = expires_at

    def revoke(self, token: str) -> None:
        if self.kind == "fastmcp":
            del self.fastmcp_tokens[token]
        else:
            self.tokens.revoke(token)


@pytest.fixture(params=["mcpserver", "fastmcp"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"


@asynccontextmanager
async def serving(
    kind: str, store_url: str
) -> AsyncIterator[tuple[Server, str, httpx.AsyncClient]]:
    server = Server(
        kind, Tasks(store_url, serving=ServingOptions(listen_token_recheck_s=RECHECK_S))
    )
    async with running(server.app) as url, httpx.AsyncClient(timeout=30) as http:
        yield server, url, http


async def start_held(http: httpx.AsyncClient, url: str) -> str:
    reply = await RawClient(http, url, token="alice").call("tools/call", {"name": "held"})
    task_id: str = reply["result"]["taskId"]
    return task_id


async def until_working(stream: MessageStream, task_id: str) -> None:
    """The acknowledgment naming ``task_id``, then its first state: the stream is live."""
    ack = await stream.next()
    assert ack is not None, "no ack"
    assert "params" in ack, ack
    assert ack["params"]["notifications"]["taskIds"] == [task_id]
    first = await stream.next()
    assert first is not None
    assert (first["method"], first["params"]["status"]) == ("notifications/tasks", "working")


def assert_graceful_end(message: dict[str, Any] | None) -> None:
    assert message is not None
    assert message["id"] == "listen-1"
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["_meta"][SUBSCRIPTION_ID] == "listen-1"


def listen(client: RawClient, task_id: str) -> Any:
    return client.stream(
        "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, request_id="listen-1"
    )


async def hear_completion(http: httpx.AsyncClient, url: str, server: Server, task_id: str) -> None:
    """A fresh token of the same principal listens again and hears the task finish."""
    async with listen(RawClient(http, url, token="alice-2"), task_id) as stream:
        await until_working(stream, task_id)
        server.release.set()
        done = await stream.next()
        assert done is not None
        assert done["params"]["status"] == "completed"
        assert_graceful_end(await stream.next())


async def test_a_stream_ends_when_its_token_expires(kind: str, store_url: str) -> None:
    """Opened with a token that expires in 3 to 4 s, the stream carries the task's state until
    then and ends with its graceful result at the expiry, not before and not long after;
    a fresh token's stream hears the rest."""
    async with serving(kind, store_url) as (server, url, http):
        task_id = await start_held(http, url)
        expires_at = int(time.time()) + 4  # 3 to 4 s from now
        server.add_expiring("alice-expiring", expires_at)
        async with listen(RawClient(http, url, token="alice-expiring"), task_id) as stream:
            await until_working(stream, task_id)
            with anyio.fail_after(expires_at - time.time() + 10):
                end = await stream.next()
            ended_at = time.time()
            assert_graceful_end(end)
            assert await stream.next() is None
        assert ended_at >= expires_at
        await hear_completion(http, url, server, task_id)


async def test_a_stream_ends_when_its_token_is_revoked(kind: str) -> None:
    """A token that does not expire, revoked while its stream runs: the server's verifier,
    asked again every ``listen_token_recheck_s``, refuses it, and the stream ends with its
    graceful result; a fresh token's stream hears the rest."""
    async with serving(kind, "memory://") as (server, url, http):
        task_id = await start_held(http, url)
        async with listen(RawClient(http, url, token="alice"), task_id) as stream:
            await until_working(stream, task_id)
            server.revoke("alice")
            with anyio.fail_after(10):
                assert_graceful_end(await stream.next())
        await hear_completion(http, url, server, task_id)


class FailingVerifier(StaticTokens):
    """Accepts ``alice`` once, then fails to answer (an introspection endpoint down)."""

    def __init__(self) -> None:
        super().__init__("alice")
        self.calls = 0

    async def verify_token(self, token: str) -> Any:
        self.calls += 1
        if self.calls > 1:
            raise ConnectionError(f"introspection endpoint down (asked about {token})")
        return await super().verify_token(token)


async def test_a_stream_whose_token_cannot_be_checked_again_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The verifier fails when asked again: the stream ends with its graceful result, and
    one WARNING says why without the token."""
    tasks = Tasks(serving=ServingOptions(listen_token_recheck_s=RECHECK_S))
    verifier = FailingVerifier()
    sdk: MCPServer[Any] = MCPServer(
        "authority",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        **static_auth(verifier=verifier),
    )
    release = anyio.Event()

    @tasks.tool(sdk, mode="required")
    async def held() -> str:
        await release.wait()
        return "released"

    caplog.set_level(logging.WARNING, logger="mcp_tasks")
    async with running(sdk) as url, httpx.AsyncClient(timeout=30) as http:
        client = RawClient(http, url, token="alice")
        task_id = (await client.call("tools/call", {"name": "held"}))["result"]["taskId"]
        verifier.calls = 0  # the listen request's own check is the first
        async with listen(client, task_id) as stream:
            await until_working(stream, task_id)
            with anyio.fail_after(10):
                assert_graceful_end(await stream.next())
        release.set()
    said = [r.getMessage() for r in caplog.records if r.name.endswith("listen_authority")]
    assert said == ["A listen stream ended: its token could not be checked again (ConnectionError)"]
    assert all("alice" not in r.getMessage() for r in caplog.records)


def test_the_recheck_interval_must_be_positive() -> None:
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="listen_token_recheck_s"):
            ServingOptions(listen_token_recheck_s=bad)

"""What the resend tests share (test_redis_resend.py on one server, the cluster's in
test_contract_redis_cluster.py): a proxy that drops a script's reply, a script object that
runs each call twice, and one scenario per write of the store."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    NewTask,
    Outcome,
    Progress,
    RequireInput,
    TaskStatus,
    WorkSpec,
    new_task_id,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks import Lease
    from mcp_tasks_redis import RedisTaskStore

LEASE_MS = 60_000
ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"message": "?", "requestedSchema": {}},
}


class DroppingProxy:
    """A TCP proxy to a Redis server that, once armed with a marker (a script's SHA), lets
    the next request holding it through and drops the reply: it closes the client's side
    as the server's answer arrives (the server has run the command by then). Unarmed it
    only forwards; closed, it can be started again on the same port (a server that went
    away and came back); ``silent``, it keeps every connection open and forwards nothing
    (a network that went quiet)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.listen_port = 0
        self.requests: list[bytes] = []
        self.dropped = 0
        self._armed: bytes | None = None
        self.silent = False
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    def drop_reply_to(self, marker: bytes) -> None:
        self._armed = marker

    def seen(self, marker: bytes) -> int:
        return sum(request.count(marker) for request in self.requests)

    async def close(self) -> None:
        """Drop every connection and stop listening."""
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self._writers += [writer, up_writer]
        doomed = asyncio.Event()

        async def to_server() -> None:
            while data := await reader.read(65536):
                self.requests.append(data)
                if self._armed is not None and self._armed in data:
                    self._armed = None
                    doomed.set()
                if self.silent:
                    continue
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if doomed.is_set():  # the server has run it: the reply is lost
                    self.dropped += 1
                    break
                if self.silent:
                    continue
                writer.write(data)
                await writer.drain()
            writer.close()
            up_writer.close()

        try:
            await asyncio.gather(to_server(), to_client())
        except (ConnectionError, OSError):
            writer.close()
            up_writer.close()


def through(url: str, proxy: DroppingProxy) -> str:
    """``url`` (a Redis URL) by way of ``proxy``."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    address = f"127.0.0.1:{proxy.listen_port}"
    return parts._replace(netloc=f"{userinfo}@{address}" if userinfo else address).geturl()


def normalized(reply: Any) -> Any:
    """A script's reply with each JSON object text (a task's hash) decoded: the order of a
    hash's fields is no part of the answer."""
    if isinstance(reply, list):
        return [normalized(item) for item in reply]
    if isinstance(reply, bytes) and reply.startswith(b"{"):
        return json.loads(reply)
    return reply


class Twice:
    """Runs every call of one of a store's scripts two times with the same keys and
    arguments (a resend), a little apart; keeps both replies and answers the second."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.replies: list[Any] = []

    async def __call__(self, keys: list[str], args: list[str | int]) -> Any:
        self.replies.append(await self.script(keys=keys, args=args))
        await asyncio.sleep(0.005)  # the server's clock moves on, as before a resend
        self.replies.append(await self.script(keys=keys, args=args))
        return self.replies[-1]


@dataclass
class Scenario:
    """One write under a resend: ``setup`` (on a plain handle) → a context, ``act`` (on the
    handle whose script is resent) → its answer, ``check`` the answer and the task."""

    script: str
    setup: Callable[[RedisTaskStore], Awaitable[dict[str, Any]]]
    act: Callable[[RedisTaskStore, dict[str, Any]], Awaitable[Any]]
    check: Callable[[RedisTaskStore, dict[str, Any], Any], Awaitable[None]]
    same_reply: bool = True  # release answers 1, then 0: the store drops the answer


async def _new(store: RedisTaskStore, **kwargs: Any) -> dict[str, Any]:
    task = await store.create(NewTask(new_task_id(), **kwargs))
    return {"id": task.task_id, "task": task}


async def _claimed(store: RedisTaskStore) -> dict[str, Any]:
    ctx = await _new(store, work=WorkSpec("job"))
    got = await store.claim("w1", lease_ms=LEASE_MS, task_id=ctx["id"])
    assert got is not None
    return ctx | {"claimed": got}


async def _asking(store: RedisTaskStore) -> dict[str, Any]:
    ctx = await _new(store)
    asked = await store.put_status(ctx["id"], RequireInput({"a": ELICIT, "b": ELICIT}))
    return ctx | {"asked": asked.record}


async def _two_with_work(store: RedisTaskStore) -> dict[str, Any]:
    first = await _new(store, work=WorkSpec("job"))
    second = await _new(store, work=WorkSpec("job"))
    return {"ids": {first["id"], second["id"]}}


async def _setup_create(store: RedisTaskStore) -> dict[str, Any]:
    return {"id": new_task_id()}


async def _act_create(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.create(NewTask(ctx["id"], work=WorkSpec("job")))


async def _check_create(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    assert got.task_id == ctx["id"]
    assert got.revision == 0
    assert await store.get(ctx["id"], ANY_OWNER) == got


async def _applied_once(store: RedisTaskStore, ctx: dict[str, Any], got: Any, before: int) -> None:
    assert got.outcome is Outcome.APPLIED
    assert got.revision == before + 1
    assert got.record.revision == before + 1
    assert await store.get(ctx["id"], ANY_OWNER) == got.record


async def _act_complete(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    claimed = ctx["claimed"]
    return await store.put_status(
        ctx["id"],
        Complete({"answer": 42}),
        lease=claimed.lease,
        expected_revision=claimed.record.revision,
    )


async def _check_complete(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    await _applied_once(store, ctx, got, ctx["claimed"].record.revision)
    assert got.record.status is TaskStatus.COMPLETED
    assert got.record.result == {"answer": 42}


async def _act_progress(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.put_status(ctx["id"], Progress("half way"))


async def _act_progress_event(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.put_status(ctx["id"], Progress("half way"), event_id="e1")


async def _check_progress(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    await _applied_once(store, ctx, got, 0)
    assert got.record.status_message == "half way"


async def _act_cancel(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.cancel(ctx["id"], None)


async def _check_cancel(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    await _applied_once(store, ctx, got, 0)
    assert got.record.status is TaskStatus.CANCELLED


async def _act_update(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.update(ctx["id"], None, {"a": {"action": "accept"}})


async def _check_update(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    await _applied_once(store, ctx, got, ctx["asked"].revision)
    assert got.record.input_responses == {"a": {"action": "accept"}}
    assert set(got.record.input_requests) == {"b"}


async def _act_claim_one(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.claim("w1", lease_ms=LEASE_MS, task_id=ctx["id"])


async def _check_claim_one(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    assert got is not None
    assert got.lease.generation == 1
    assert await store.get(ctx["id"], ANY_OWNER) == got.record


async def _act_claim_next(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.claim("w1", lease_ms=LEASE_MS)


async def _check_claim_next(store: RedisTaskStore, ctx: dict[str, Any], got: Any) -> None:
    assert got is not None
    assert got.lease.generation == 1
    assert await store.get(got.record.task_id, ANY_OWNER) == got.record
    (other,) = ctx["ids"] - {got.record.task_id}
    untouched = await store.get(other, ANY_OWNER)
    assert untouched.claim is None
    assert untouched.generation == 0


async def _act_renew(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.renew(ctx["claimed"].lease, lease_ms=2 * LEASE_MS)


async def _check_renew(store: RedisTaskStore, ctx: dict[str, Any], got: Lease) -> None:
    record = await store.get(ctx["id"], ANY_OWNER)
    assert record.claim is not None
    assert record.claim.expires_at == got.expires_at
    assert got.generation == 1
    assert record.revision == ctx["claimed"].record.revision


async def _act_release(store: RedisTaskStore, ctx: dict[str, Any]) -> Any:
    return await store.release(ctx["claimed"].lease)


async def _check_release(store: RedisTaskStore, ctx: dict[str, Any], got: None) -> None:
    record = await store.get(ctx["id"], ANY_OWNER)
    assert record.claim is None
    assert record.generation == 1


SCENARIOS = {
    "create": Scenario("create", _setup_create, _act_create, _check_create),
    "complete": Scenario("put", _claimed, _act_complete, _check_complete),
    "progress": Scenario("put", _new, _act_progress, _check_progress),
    "progress_event": Scenario("put", _new, _act_progress_event, _check_progress),
    "cancel": Scenario("cancel", _new, _act_cancel, _check_cancel),
    "update": Scenario("update", _asking, _act_update, _check_update),
    "claim_one": Scenario(
        "claim_one", lambda s: _new(s, work=WorkSpec("job")), _act_claim_one, _check_claim_one
    ),
    "claim_next": Scenario("claim_next", _two_with_work, _act_claim_next, _check_claim_next),
    "renew": Scenario("renew", _claimed, _act_renew, _check_renew),
    "release": Scenario("release", _claimed, _act_release, _check_release, same_reply=False),
}


async def run_twice(store: RedisTaskStore, scenario: Scenario) -> None:
    """``scenario`` with its script run twice per call: the second run answers what the
    first answered (a hash compared field by field) and writes nothing more."""
    ctx = await scenario.setup(store)
    store._client()
    twice = Twice(store._scripts[scenario.script])
    store._scripts[scenario.script] = twice  # type: ignore[assignment]
    got = await scenario.act(store, ctx)
    assert len(twice.replies) == 2
    if scenario.same_reply:
        assert normalized(twice.replies[1]) == normalized(twice.replies[0])
    store._scripts[scenario.script] = twice.script
    await scenario.check(store, ctx, got)


async def run_dropped(
    direct: RedisTaskStore,
    store: RedisTaskStore,
    proxies: list[DroppingProxy],
    scenario: Scenario,
) -> None:
    """``scenario`` set up on ``direct``, acted on ``store`` (whose client reaches Redis
    through ``proxies``) with the script's first reply dropped: redis-py resends it once,
    and the store's answer and the task are as after one run."""
    ctx = await scenario.setup(direct)
    client = store._client()
    script = store._scripts[scenario.script]
    await client.script_load(script.script)  # a NOSCRIPT reply would hide the resend
    sha = script.sha.encode()
    for proxy in proxies:
        proxy.drop_reply_to(sha)
    got = await scenario.act(store, ctx)
    assert sum(proxy.dropped for proxy in proxies) == 1
    assert sum(proxy.seen(sha) for proxy in proxies) == 2  # the script and its resend
    await scenario.check(direct, ctx, got)

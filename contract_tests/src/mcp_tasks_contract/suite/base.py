"""What every part of the contract shares: the fixtures, the knobs and small scenario helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import anyio
import pytest

from mcp_tasks import ANY_OWNER, NewTask, Store, TaskRecord, WorkSpec, new_task_id
from mcp_tasks_contract.handles import StoreFactory, StoreHandles

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp_tasks.domain.jsonsafe import JSONObject

T = TypeVar("T")

#: A lease long enough never to run out during a test, even on a slow backend.
LONG_LEASE_MS = 60_000
#: A lease or TTL short enough to run out during a test ...
SHORT_MS = 40
#: ... and a sleep that is surely longer than it.
PAST_SHORT_S = 0.25

ELICIT: JSONObject = {"method": "elicitation/create", "params": {"message": "Proceed?"}}
BOOM: JSONObject = {"code": -32603, "message": "boom"}


class ContractBase:
    """Fixtures and knobs of :class:`~mcp_tasks_contract.StoreContract`."""

    pytestmark = pytest.mark.anyio

    stateful_max_examples: ClassVar[int] = 30
    """Examples of the stateful model test. Lower it on slow backends; never zero."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    def store(self) -> StoreFactory:
        """Override me: return or yield an async factory ``(namespace, options) -> Store``.

        Each call opens a NEW handle (its own connection or client) on ``namespace``; handles
        on one namespace share its tasks. Tear down (drop schemas, keys) after a ``yield``.
        """
        raise NotImplementedError("Override the `store` fixture in your StoreContract subclass")

    @pytest.fixture
    async def handles(self, store: StoreFactory) -> AsyncIterator[StoreHandles]:
        """One fresh namespace per test; every handle the test opens is closed afterwards."""
        opened = StoreHandles(store)
        try:
            yield opened
        finally:
            await opened.aclose()


async def new_task(
    store: Store,
    *,
    owner: str | None = None,
    ttl_ms: int | None = 3_600_000,
    work: WorkSpec | None = None,
    status_message: str | None = None,
) -> TaskRecord:
    """Create a task with a fresh id."""
    task = NewTask(
        task_id=new_task_id(),
        owner=owner,
        ttl_ms=ttl_ms,
        work=work,
        status_message=status_message,
    )
    return await store.create(task)


def job(*delays_ms: int) -> WorkSpec:
    """A work descriptor a runner could execute, with the given retry delays."""
    return WorkSpec(type="job", input={"n": 1}, retry_delays_ms=delays_ms)


async def current(store: Store, task_id: str) -> TaskRecord:
    """The record as a trusted server-side reader sees it."""
    return await store.get(task_id, ANY_OWNER)


async def assert_unchanged(store: Store, before: TaskRecord) -> None:
    """Nothing was written: the stored record is exactly what it was before the failed call."""
    assert await current(store, before.task_id) == before


async def outcome_of(call: Callable[[], Awaitable[T]]) -> T | Exception:
    """Run a call; its result, or the error it raised (for races that expect some to lose)."""
    try:
        return await call()
    except Exception as exc:
        return exc


async def run_concurrently(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Start every call at once in one task group; results (or errors) in call order."""
    results: list[Any] = [None] * len(calls)

    async def run(index: int) -> None:
        results[index] = await outcome_of(calls[index])

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(run, index)
    return results

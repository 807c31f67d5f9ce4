"""What every part of the contract shares: the fixtures, the knobs and small scenario helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

import anyio
import pytest

from mcp_tasks import (
    ANY_OWNER,
    ManualClock,
    NewTask,
    StaleLease,
    Store,
    TaskNotFound,
    TaskRecord,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.stores.encrypted import Keyring, new_key
from mcp_tasks_contract.handles import StoreFactory, StoreHandles
from mcp_tasks_contract.offers import Offers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.domain.jsonsafe import JSONObject

T = TypeVar("T")

ServerRestart: TypeAlias = Callable[[], Awaitable[None]]
"""What ``store_server_restart`` gives: ``await restart()`` stops and starts the server."""

#: A lease long enough never to run out during a test, even on a slow backend under load
#: (500 claims on an embedded MongoDB under a loaded machine have taken minutes), and
#: shorter than the tasks' default hour-long TTL (``new_task``), so a claim never holds a
#: task past its TTL (S-TTL.1) unless the test means it to.
LONG_LEASE_MS = 600_000
#: A lease or TTL short enough to run out during a test: the test then waits until the
#: store's clock is past its end (``handles.wait_past``), never for a fixed time.
SHORT_MS = 40

ELICIT: JSONObject = {"method": "elicitation/create", "params": {"message": "Proceed?"}}
BOOM: JSONObject = {"code": -32603, "message": "boom"}


class ContractBase:
    """Fixtures and knobs of :class:`~mcp_tasks_contract.StoreContract`."""

    pytestmark = pytest.mark.anyio

    stateful_max_examples: ClassVar[int] = 30
    """Examples of the stateful model test. Lower it on slow backends; never zero."""

    stateful_shrink_s: ClassVar[int] = 10
    """How long the stateful test may shrink a failing example to a shorter one before it
    reports the shortest found so far (a passing run never shrinks)."""

    offers: ClassVar[Offers] = Offers()
    """The optional behaviours the store offers (:class:`~mcp_tasks_contract.Offers`); the
    rest are reported "not offered". The contract's rules are never optional."""

    contract_version: ClassVar[int | None] = None
    """The contract version the store was written against
    (:data:`~mcp_tasks_contract.versions.CONTRACT_VERSION` then). Every rule is checked
    all the same; the report names what is new since, and marks each failure of a newer
    rule with what changed. ``--contract-version N`` overrides it for one run."""

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
    def store_clock(self) -> ManualClock | None:
        """The clock every handle must keep when ``offers.clock`` is declared: a fresh
        :class:`~mcp_tasks.ManualClock` per test, which the ``store`` fixture's factory gives
        to every handle it opens; the suite then moves time by advancing it. ``None``
        otherwise: the store keeps real time, and the suite waits on it."""
        return ManualClock() if self.offers.clock else None

    @pytest.fixture
    def store_server_restart(self) -> ServerRestart:
        """Override me when ``offers.server_restart`` is declared: a coroutine function that
        restarts the server the ``store`` factory's handles reach (and returns once it
        answers again)."""

        async def restart() -> None:
            raise NotImplementedError(
                "offers.server_restart is set: override the store_server_restart fixture"
            )

        return restart

    @pytest.fixture
    def store_encryption(self, request: pytest.FixtureRequest) -> Keyring | None:
        """The keys every handle seals with: a fresh one with ``--contract-encrypted``
        (the store then runs the suite as ``Tasks(encryption_keys=…)`` uses it), else
        ``None``. Override it to run your own way."""
        if request.config.getoption("contract_encrypted", False):
            return Keyring.parse(f"contract:{new_key()}")
        return None

    @pytest.fixture
    async def handles(
        self, store: StoreFactory, store_clock: ManualClock | None, store_encryption: Keyring | None
    ) -> AsyncIterator[StoreHandles]:
        """One fresh namespace per test; every handle the test opens is closed afterwards."""
        opened = StoreHandles(store, store_clock, store_encryption)
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


#: The first TTL of tasks that must be set up (written, claimed) before they expire.
SET_UP_TTL_MS = 1_000


async def in_time(set_up: Callable[[int], Awaitable[T]], ttl_ms: int = SET_UP_TTL_MS) -> T:
    """Run ``set_up(ttl_ms)``, which creates short-lived tasks and writes to them before they
    expire. On a real clock a slow or loaded backend may let one expire first (it raises
    TaskNotFound or StaleLease): then run it again with four times the TTL, so the test never
    depends on how fast its own steps run. ``set_up`` must account for the tasks of a failed
    attempt (they expire and are reaped like the others)."""
    while True:
        try:
            return await set_up(ttl_ms)
        except (TaskNotFound, StaleLease):
            ttl_ms *= 4


def expiry(record: TaskRecord) -> int:
    """When the task expires (it must have a TTL): wait past it with ``handles.wait_past``."""
    assert record.expires_at is not None, "the task has no TTL"
    return record.expires_at


def job(*delays_ms: int, kind: str = "job") -> WorkSpec:
    """A work descriptor a runner could execute, of work type ``kind``, with the given
    retry delays."""
    return WorkSpec(type=kind, input={"n": 1}, retry_delays_ms=delays_ms)


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

"""The store kit: which driver errors become StoreUnavailable, the close guard, and the
bound on waiting (per operation, and one per request)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from mcp_tasks.domain.errors import InvalidArgument, StoreUnavailable, TaskNotFound
from mcp_tasks.stores.kit import (
    CLOSED_MESSAGE,
    CloseGuard,
    DriverErrors,
    detached,
    request_bound,
    rest_of_request,
    within,
)


class DriverError(Exception):
    """A driver's base error."""


class Refused(DriverError):
    """A driver error the backend reads itself (a server's answer)."""


class ContractErrorFromTheDriver(TaskNotFound, DriverError):
    """A contract error that also subclasses the driver's error."""


UNAVAILABLE = DriverErrors(DriverError, OSError, excluding=(Refused,))


@pytest.mark.parametrize("error", [DriverError("down"), OSError("reset"), ConnectionError()])
def test_a_listed_driver_error_becomes_store_unavailable_with_it_as_cause(
    error: Exception,
) -> None:
    with pytest.raises(StoreUnavailable) as raised, UNAVAILABLE:
        raise error
    assert raised.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        Refused("no"),  # excluded by the backend
        ContractErrorFromTheDriver(),  # the contract's own errors pass
        StoreUnavailable("on purpose"),
        InvalidArgument("bad"),
        ValueError("a bug"),  # not listed
    ],
)
def test_every_other_error_leaves_the_block_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as raised, UNAVAILABLE:
        raise error
    assert raised.value is error


def test_one_object_serves_nested_and_repeated_blocks() -> None:
    with UNAVAILABLE, UNAVAILABLE:
        pass
    for _ in range(2):
        with pytest.raises(StoreUnavailable), UNAVAILABLE, UNAVAILABLE:
            raise OSError
    assert "OSError" in repr(UNAVAILABLE)
    assert "Refused" in repr(UNAVAILABLE)


def test_driver_errors_needs_an_exception_type() -> None:
    with pytest.raises(ValueError, match="at least one"):
        DriverErrors()


def test_the_close_guard_refuses_after_close_and_reports_the_first_close() -> None:
    guard = CloseGuard()
    guard.check()
    assert not guard.closed
    assert guard.close() is True
    assert guard.close() is False
    assert guard.closed
    with pytest.raises(StoreUnavailable, match=CLOSED_MESSAGE):
        guard.check()
    assert CLOSED_MESSAGE == "The store is closed"


BOUND_MS = 400


@pytest.mark.anyio
async def test_within_a_request_every_operation_ends_by_one_bound_from_its_start() -> None:
    """Inside ``request_bound`` an operation's bound counts from the request's start: after
    most of the bound went to an earlier call, the next gets what is left, and with nothing
    left it raises at once. Outside a request each operation has its whole bound."""
    with within(BOUND_MS) as left_s:
        assert left_s == pytest.approx(BOUND_MS / 1000, abs=0.05)
    with request_bound():
        await anyio.sleep(0.3)
        with within(BOUND_MS) as left_s:
            assert left_s == pytest.approx(0.1, abs=0.05)
        started = anyio.current_time()
        with pytest.raises(StoreUnavailable, match=f"within {BOUND_MS} ms"), within(BOUND_MS):
            await anyio.sleep(10)
        assert anyio.current_time() - started < 0.2
        with pytest.raises(StoreUnavailable), within(BOUND_MS):
            raise AssertionError("not entered: no time was left")


@pytest.mark.anyio
async def test_a_task_started_inside_a_request_keeps_its_own_bound() -> None:
    """A task started from inside a request (a task body's run) inherits the context but
    not the request's deadline: each of its operations has its whole bound."""
    seen: list[float] = []

    async def body() -> None:
        await anyio.sleep(0.5)  # past the request's deadline
        with within(BOUND_MS) as left_s:
            seen.append(left_s)

    with request_bound():
        with within(BOUND_MS):
            pass
        async with anyio.create_task_group() as group:
            group.start_soon(body)
    assert seen == [pytest.approx(BOUND_MS / 1000, abs=0.05)]


@pytest.mark.anyio
async def test_the_rest_of_a_request_ends_at_its_deadline() -> None:
    """What a request does besides its store calls (a change signal) ends at the deadline
    its store calls set; before any, and outside a request, it is not bounded."""
    with request_bound():
        with rest_of_request() as scope:
            pass
        assert scope.deadline == float("inf")
        with within(BOUND_MS):
            pass
        started = anyio.current_time()
        with rest_of_request():
            await anyio.sleep(10)
        assert anyio.current_time() - started < BOUND_MS / 1000 + 0.2
    with rest_of_request() as scope:
        assert scope.deadline == float("inf")


async def failing_driver_call(ended: anyio.Event) -> None:
    """A driver call that runs 0.3 s and fails by its own deadline; ``ended`` set as it ends."""
    try:
        await anyio.sleep(0.3)
    finally:
        ended.set()
    raise OSError("the driver's own deadline")


def unread_failures() -> list[object]:
    """What the running loop reports as never retrieved, from now on."""
    unread: list[object] = []
    asyncio.get_running_loop().set_exception_handler(lambda _l, context: unread.append(context))
    return unread


@pytest.mark.anyio
async def test_a_detached_call_is_never_cancelled_and_its_caller_stops_waiting() -> None:
    """A caller cancelled while it waits for a detached call stops waiting at once; the call
    runs on to its end, and its failure is read (never logged as unretrieved)."""
    ended = anyio.Event()
    call = failing_driver_call(ended)
    unread = unread_failures()
    started = anyio.current_time()
    with anyio.move_on_after(0.05):
        await detached(call)
    assert anyio.current_time() - started < 0.2
    assert not ended.is_set()
    with anyio.fail_after(5):
        await ended.wait()
    await anyio.sleep(0.05)
    assert unread == []
    assert await detached(asyncio.sleep(0, result="done")) == "done"


@pytest.mark.anyio
async def test_a_detached_call_is_given_up_once_the_server_is_gone() -> None:
    """``gone`` done (the driver's news that the server refuses connections): its caller
    stops waiting and raises StoreUnavailable from that news; the call runs on to its end,
    its failure read. A call that ended first answers; a caller cancelled meanwhile stops
    waiting without either future cancelled."""
    ended = anyio.Event()
    call = failing_driver_call(ended)
    unread = unread_failures()
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[BaseException] = loop.create_future()
    refused = ConnectionRefusedError("refused")
    loop.call_later(0.05, gone.set_result, refused)
    with pytest.raises(StoreUnavailable) as raised:
        await detached(call, gone=gone)
    assert raised.value.__cause__ is refused
    assert not ended.is_set()
    with anyio.fail_after(5):
        await ended.wait()
    await anyio.sleep(0.05)
    assert unread == []

    never: asyncio.Future[BaseException] = loop.create_future()
    assert await detached(asyncio.sleep(0, result="done"), gone=never) == "done"
    with anyio.move_on_after(0.05):
        await detached(anyio.sleep(5), gone=never)
    assert not never.cancelled()


@pytest.mark.anyio
async def test_a_detached_result_nobody_waits_for_is_handed_to_abandoned() -> None:
    """A result that arrives after its caller stopped waiting goes to ``abandoned`` (a
    connection to close or give back), once; a result its caller took, or a failure, never
    does."""
    handed: list[str] = []
    arrived = anyio.Event()

    def hand(late: str) -> None:
        handed.append(late)
        arrived.set()

    with anyio.move_on_after(0.05):
        await detached(_later("late connection", 0.2), abandoned=hand)
    assert handed == []
    with anyio.fail_after(5):
        await arrived.wait()
    assert handed == ["late connection"]

    assert await detached(_later("taken", 0), abandoned=hand) == "taken"
    unread = unread_failures()
    with anyio.move_on_after(0.05):
        await detached(_later(None, 0.1), abandoned=hand)
    await anyio.sleep(0.2)
    assert handed == ["late connection"]
    assert unread == []


async def _later(result: str | None, delay_s: float) -> str:
    await asyncio.sleep(delay_s)
    if result is None:
        raise ConnectionError("the driver's own timeout")
    return result

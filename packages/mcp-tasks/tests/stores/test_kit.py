"""The store kit: which driver errors become StoreUnavailable, and the close guard."""

from __future__ import annotations

import pytest

from mcp_tasks.domain.errors import InvalidArgument, StoreUnavailable, TaskNotFound
from mcp_tasks.stores.kit import (
    CLOSED_MESSAGE,
    CloseGuard,
    DriverErrors,
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

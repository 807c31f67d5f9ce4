"""StoreOptions: the caps' defaults, whom the per-owner cap holds, and bad values."""

from __future__ import annotations

import pytest

from mcp_tasks import InvalidArgument, StoreOptions


def test_the_default_caps_leave_room_for_ten_principals() -> None:
    """By default one principal may hold a tenth of the row cap: 1 000 of 10 000."""
    options = StoreOptions()
    assert (options.max_rows, options.max_active_per_owner) == (10_000, 1_000)


def test_the_per_owner_cap_holds_principals_only() -> None:
    """owner_cap is the per-owner cap for an owner, none for an ownerless task (a server
    without auth keeps its whole row cap), and none for anyone once the cap is off."""
    assert StoreOptions().owner_cap("alice") == 1_000
    assert StoreOptions().owner_cap(None) is None
    assert StoreOptions(max_active_per_owner=5).owner_cap("") == 5  # an owner, if empty
    off = StoreOptions(max_active_per_owner=None)
    assert (off.owner_cap("alice"), off.owner_cap(None)) == (None, None)


@pytest.mark.parametrize("name", ["max_rows", "max_active_per_owner"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5, "10"])
def test_a_cap_is_a_positive_integer_or_none(name: str, value: object) -> None:
    """A cap of 0 or below, or not a whole number, is InvalidArgument naming the option."""
    with pytest.raises(InvalidArgument, match=name):
        StoreOptions(**{name: value})  # type: ignore[arg-type]

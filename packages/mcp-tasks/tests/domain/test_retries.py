"""Retry policies are exact delay lists; the helpers only write lists."""

from __future__ import annotations

import pytest

from mcp_tasks import InvalidArgument, ToolOptions, exponential_backoff, fixed_backoff


def test_fixed_backoff_repeats_one_delay() -> None:
    assert fixed_backoff(500, 3) == (500, 500, 500)
    assert fixed_backoff(0, 2) == (0, 0)
    assert fixed_backoff(500, 0) == ()


def test_exponential_backoff_grows_by_its_factor_up_to_its_cap() -> None:
    assert exponential_backoff(100, 4) == (100, 200, 400, 800)
    assert exponential_backoff(100, 4, factor=3) == (100, 300, 900, 2700)
    assert exponential_backoff(100, 5, max_ms=350) == (100, 200, 350, 350, 350)
    assert exponential_backoff(250, 3, factor=1.5) == (250, 375, 562)


@pytest.mark.parametrize(
    "make",
    [
        lambda: fixed_backoff(-1, 2),
        lambda: fixed_backoff(10, -1),
        lambda: fixed_backoff(1.5, 2),  # type: ignore[arg-type]
        lambda: fixed_backoff(True, 2),  # type: ignore[arg-type]
        lambda: exponential_backoff(10, 2, factor=0.5),
        lambda: exponential_backoff(10, 2, max_ms=-5),
        lambda: ToolOptions(retry_delays_ms=[10, -1]),
        lambda: ToolOptions(retry_delays_ms=["10"]),  # type: ignore[list-item]
    ],
)
def test_nonsense_delays_are_refused_where_they_are_written(make: object) -> None:
    with pytest.raises(InvalidArgument):
        make()  # type: ignore[operator]


def test_a_tool_keeps_its_delays_as_an_exact_tuple() -> None:
    assert ToolOptions(retry_delays_ms=fixed_backoff(5, 2)).retry_delays_ms == (5, 5)
    assert ToolOptions(retry_delays_ms=iter([1, 2])).retry_delays_ms == (1, 2)

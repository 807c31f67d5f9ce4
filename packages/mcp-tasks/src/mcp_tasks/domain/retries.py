"""Retry policies are exact lists of delays: the n-th retry waits the n-th delay.

A list says everything a reader needs (how many retries, how long each waits) and is what the
task's work descriptor stores (``WorkSpec.retry_delays_ms``), so a retry after a restart
waits exactly what the first process would have waited. These helpers only write lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_tasks.domain.errors import InvalidArgument

if TYPE_CHECKING:
    from collections.abc import Iterable


def _count(times: int) -> int:
    if isinstance(times, bool) or not isinstance(times, int) or times < 0:
        raise InvalidArgument("times must be a non-negative integer")
    return times


def _delay(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} must be a non-negative integer of milliseconds")
    return value


def retry_delays(delays_ms: Iterable[int]) -> tuple[int, ...]:
    """An explicit list of delays, checked: each a non-negative integer of milliseconds.

    Raises:
        InvalidArgument: a delay is not a non-negative integer.
    """
    return tuple(_delay(d, "a retry delay") for d in delays_ms)


def fixed_backoff(delay_ms: int, times: int) -> tuple[int, ...]:
    """``times`` retries, each after ``delay_ms``: ``fixed_backoff(500, 3) == (500, 500, 500)``."""
    return (_delay(delay_ms, "delay_ms"),) * _count(times)


def exponential_backoff(
    first_ms: int, times: int, *, factor: float = 2.0, max_ms: int | None = None
) -> tuple[int, ...]:
    """``times`` retries, the first after ``first_ms``, each next one ``factor`` times longer,
    none longer than ``max_ms``: ``exponential_backoff(100, 4) == (100, 200, 400, 800)``.

    No jitter: the delays are exact, and a task's retries are already spread by when it ran.
    """
    first = _delay(first_ms, "first_ms")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
        raise InvalidArgument("factor must be a number of at least 1")
    cap = None if max_ms is None else _delay(max_ms, "max_ms")
    delays: list[int] = []
    delay = float(first)
    for _ in range(_count(times)):
        value = round(delay)
        delays.append(value if cap is None else min(value, cap))
        delay *= factor
    return tuple(delays)

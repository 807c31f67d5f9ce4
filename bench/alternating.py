"""Store against raw driver in alternating rounds: the measure of the store benchmarks.

A busy machine slows whatever runs while it is busy. Measuring all of the store and then
all of the raw driver puts any such spell on one side of the ratio only; taking them in
turns (store, raw, store, raw, ...) and keeping the median of the rounds' ratios spreads
it over both. ``bench/sql_stores.py``, ``redis_store.py`` and ``mongodb_store.py``
measure this way, and hand the bench suite (``bench/stores.py``) the rates of the median
round (:func:`as_rates`).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    Call = Callable[[int], Awaitable[object]]


async def rate(ops: int, call: Call) -> float:
    """Calls per second of ``call``, one at a time."""
    start = time.perf_counter()
    for i in range(ops):
        await call(i)
    return ops / (time.perf_counter() - start)


async def rounds(
    pairs: Mapping[str, tuple[Call, Call]], ops: int, count: int, warm_up: int = 200
) -> dict[str, list[float]]:
    """Per operation, the (store, raw) rates of each of ``count`` rounds, flat: store rates
    at even indexes, raw at odd. Each call is warmed up first (connections, prepared
    statements, the first page reads).

    One operation's rounds all run before the next operation's: a write leaves work behind
    for the next read of its row (Postgres prunes the dead row versions of a page on the
    next visit), which would land on whichever side reads first in every round.
    """
    results: dict[str, list[float]] = {}
    for name, (ours, theirs) in pairs.items():
        await rate(warm_up, ours)
        await rate(warm_up, theirs)
        results[name] = []
        for _ in range(count):
            results[name] += [await rate(ops, ours), await rate(ops, theirs)]
    return results


def ratios(rates: list[float]) -> list[float]:
    """Each round's store rate / raw rate."""
    return [a / b for a, b in zip(rates[0::2], rates[1::2], strict=True)]


#: The flat names of each operation's (store, raw) rates, as bench/stores.py reads them.
FLAT_NAMES = {
    "get": ("store.get", "raw read"),
    "put_status": ("store.put_status", "raw update"),
    "claim": ("store.claim", "raw claim"),
}


def median_round(rates: list[float]) -> tuple[float, float]:
    """The (store, raw) rates of the round whose store/raw ratio is the median of the
    rounds' ratios (the lower middle one for an even count): both figures come from one
    round, measured side by side, so their ratio is that median. Not the median store rate
    over the median raw rate: those two can come from rounds a busy machine slowed
    differently, and their ratio is then no round's."""
    pairs = list(zip(rates[0::2], rates[1::2], strict=True))
    ratio = statistics.median_low(ours / theirs for ours, theirs in pairs)
    return next(pair for pair in pairs if pair[0] / pair[1] == ratio)


def as_rates(results: Mapping[str, list[float]]) -> dict[str, float]:
    """Each measured operation's store and raw rates of its median round, by flat name."""
    rates: dict[str, float] = {}
    for op, rounds_ in results.items():
        ours, theirs = FLAT_NAMES[op]
        rates[ours], rates[theirs] = median_round(rounds_)
    return rates

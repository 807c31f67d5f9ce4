"""Section 4c (bench/scale.py) at a small size on every durable store: it runs, and what each
store counts stays exact as its table grows, through creates, completes, claims, renews and
reaps. The speed itself is measured by ``nox -s bench``, never asserted here."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

from bench import scale
from bench.common import find_backends

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

#: The two sizes, small enough for every run of the tests (the embedded MongoDB server, a
#: test server, writes slowly: smaller there).
SIZES = {"sqlite": (1_000, 4_000), "postgres": (1_000, 4_000), "redis": (1_000, 4_000)}
SIZES["mongodb"] = (500, 1_500)
#: The stores that keep their counts as they write (``counts()``); MongoDB does not.
COUNTING = {"sqlite", "postgres", "redis"}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_counts_and_stats_stay_exact_from_a_small_table_to_a_larger_one(
    name: str, tmp_path: Path
) -> None:
    """Seeded as a served store is (80 % finished, 20 % queued with work, 2,000 owners) to
    a small size and then to a larger one, with every operation run at each size and 200
    expired rows reaped beside the table: ``stats()`` and, where the store keeps them,
    ``counts()`` give exactly the rows and the statuses the section wrote, and every
    operation has a figure at both sizes."""
    small, large = SIZES[name]
    with ExitStack() as stack:
        backends = find_backends(stack, tmp_path, [name])
        backend = backends.get(name)
        if backend is None:
            pytest.skip(backends.missing.get(name, f"{name} is not available"))
        result = asyncio.run(scale.section(backend.url, small, large, 50, 600, expired=200))
    counted = {"stats", "counts"} if name in COUNTING else {"stats"}
    for size in ("small", "large"):
        check = result["exact"][size]
        assert check["exact"], check
        assert counted == check.keys() & {"stats", "counts"}
        ops = {op for op in scale.OPERATIONS if op != "counts" or name in COUNTING}
        assert set(result[size]) == {f"{op}_us" for op in ops}
    assert result["rows"]["large"] >= large

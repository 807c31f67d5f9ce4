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

#: The two sizes, small enough for every run of the tests.
SMALL, LARGE = 1_000, 4_000


@pytest.mark.parametrize("name", ["sqlite", "postgres", "redis", "mongodb"])
def test_counts_and_stats_stay_exact_from_a_small_table_to_a_larger_one(
    name: str, tmp_path: Path
) -> None:
    """Seeded as a served store is (80 % finished, 20 % queued with work, 2,000 owners) to
    1 k rows and then to 4 k, with every operation run at each size and 200 expired rows
    reaped beside the table: ``counts()`` and ``stats()`` give exactly the rows and the
    statuses the section wrote, and every operation has a figure at both sizes."""
    with ExitStack() as stack:
        backends = find_backends(stack, tmp_path, [name])
        backend = backends.get(name)
        if backend is None:
            pytest.skip(backends.missing.get(name, f"{name} is not available"))
        result = asyncio.run(scale.section(backend.url, SMALL, LARGE, 50, 600, expired=200))
    for size in ("small", "large"):
        check = result["exact"][size]
        assert check["exact"], check
        assert {"counts", "stats"} <= check.keys()
        assert set(result[size]) == {f"{op}_us" for op in scale.OPERATIONS}
    assert result["rows"]["large"] >= LARGE

"""Store clocks: epoch milliseconds. Time is a dependency, so stores take one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

from mcp_tasks.domain.errors import InvalidArgument

Clock: TypeAlias = Callable[[], int]


def system_clock() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told: for tests of TTLs, leases and retries."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise InvalidArgument("a clock does not run backwards")
        self.now_ms += ms

"""Task ids, lease tokens, redaction, and the clocks."""

from __future__ import annotations

import re
import time

import pytest

from mcp_tasks import ManualClock, MemoryTaskStore, NewTask, TaskNotFound, system_clock
from mcp_tasks.domain.ids import new_task_id, new_token, redact

URL_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


def test_task_ids_are_43_url_safe_characters_and_unique() -> None:
    """An id is 256 random bits: 43 url-safe, header-safe characters, never repeated."""
    ids = [new_task_id() for _ in range(2_000)]
    assert all(len(i) == 43 and URL_SAFE.match(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_task_id_never_starts_with_a_dash() -> None:
    """A command line would read ``-x…`` as an option (``mcp-tasks get URL -x…`` failed about
    once in 64 tasks). 20 000 ids: about 310 would start with ``-`` by chance."""
    assert not any(new_task_id().startswith("-") for _ in range(20_000))


def test_lease_tokens_are_url_safe_and_unique() -> None:
    """Tokens are 128 random bits, url-safe."""
    tokens = [new_token() for _ in range(2_000)]
    assert all(len(t) == 22 and URL_SAFE.match(t) for t in tokens)
    assert len(set(tokens)) == len(tokens)


def test_redact_keeps_only_the_first_six_characters() -> None:
    """What may appear in a DEBUG line: 6 characters and an ellipsis, never the capability."""
    task_id = new_task_id()
    shown = redact(task_id)
    assert shown == task_id[:6] + "…"
    assert task_id[6:12] not in shown


def test_manual_clock_moves_only_when_told() -> None:
    """ManualClock starts at 2026-01-01T00:00:00Z, returns the same time until advanced."""
    clock = ManualClock()
    assert clock() == clock() == 1_767_225_600_000
    clock.advance(250)
    assert clock() == 1_767_225_600_250
    clock.advance(0)
    assert clock() == 1_767_225_600_250
    assert ManualClock(start_ms=5)() == 5


def test_manual_clock_never_runs_backwards() -> None:
    """A negative advance is refused and leaves the time as it was."""
    clock = ManualClock(start_ms=100)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock() == 100


def test_system_clock_is_epoch_milliseconds() -> None:
    """system_clock is wall-clock time as integer epoch milliseconds."""
    before = time.time_ns() // 1_000_000
    now = system_clock()
    after = time.time_ns() // 1_000_000
    assert isinstance(now, int)
    assert before <= now <= after


@pytest.mark.anyio
async def test_a_manual_clock_drives_ttls_in_the_memory_store() -> None:
    """With an injected clock, a task expires exactly when its TTL has passed on that clock."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)
    record = await store.create(NewTask(task_id=new_task_id(), ttl_ms=1_000))
    assert record.expires_at == clock() + 1_000
    clock.advance(999)
    assert await store.get(record.task_id, None) == record
    clock.advance(1)
    with pytest.raises(TaskNotFound):
        await store.get(record.task_id, None)

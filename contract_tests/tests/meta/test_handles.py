"""StoreHandles: fresh, schema-safe namespaces, and every handle closed at teardown."""

from __future__ import annotations

import re

import pytest

from mcp_tasks import (
    ManualClock,
    MemoryBackend,
    MemoryTaskStore,
    Store,
    StoreOptions,
    StoreUnavailable,
)
from mcp_tasks_contract import StoreHandles, new_namespace
from mcp_tasks_contract.suite.payloads import same_json

pytestmark = pytest.mark.anyio


def test_namespaces_are_fresh_and_safe_as_schema_names() -> None:
    """Namespaces are lowercase identifiers (a valid unquoted SQL schema), never repeated."""
    names = {new_namespace() for _ in range(1_000)}
    assert len(names) == 1_000
    assert all(re.fullmatch(r"mcpt_[0-9a-f]{12}", name) for name in names)


async def test_handles_share_a_namespace_and_all_close_at_teardown() -> None:
    """open() passes the test's namespace and options to the factory; aclose closes them all."""
    seen: list[tuple[str, StoreOptions]] = []
    backend = MemoryBackend()

    async def factory(namespace: str, options: StoreOptions) -> Store:
        seen.append((namespace, options))
        return MemoryTaskStore(options, backend=backend)

    handles = StoreHandles(factory)
    capped = StoreOptions(max_rows=3)
    first = await handles.open(capped)
    others = await handles.open_many(2)
    elsewhere = await handles.open(namespace="mcpt_other")
    assert [ns for ns, _ in seen] == [handles.namespace] * 3 + ["mcpt_other"]
    assert seen[0][1] == capped
    assert seen[1][1] == StoreOptions()
    await handles.aclose()
    for handle in (first, *others, elsewhere):
        with pytest.raises(StoreUnavailable):
            await handle.reap()
    await handles.aclose()


def test_the_rule_marker_is_registered(pytestconfig: pytest.Config) -> None:
    """The package's pytest11 plugin registers `rule`, so --strict-markers accepts it."""
    assert any(line.startswith("rule(") for line in pytestconfig.getini("markers"))


def test_same_json_tells_negative_zero_and_types_apart() -> None:
    """The payload tests' comparison is exact: -0.0 is not 0.0, 1 is not 1.0 nor True."""
    assert same_json({"a": [0.1, -0.0]}, {"a": [0.1, -0.0]})
    assert not same_json(-0.0, 0.0)
    assert not same_json([0.0], [-0.0])
    assert not same_json(1, 1.0)
    assert not same_json(1, True)


async def test_wait_past_advances_a_manual_clock_and_waits_for_a_real_one() -> None:
    """wait_past moves a manual clock just past the instant; on a real clock it returns once
    the store's clock (read in a namespace of its own) is past it, leaving the test's
    namespace untouched."""
    clock = ManualClock()
    backends: dict[str, MemoryBackend] = {}

    async def factory(namespace: str, options: StoreOptions) -> Store:
        backend = backends.setdefault(namespace, MemoryBackend())
        return MemoryTaskStore(options, clock=clock, backend=backend)

    manual = StoreHandles(factory, clock)
    start = clock()
    await manual.wait_past(start + 500)
    assert clock() == start + 501
    await manual.wait_past(start)  # already past: time does not move
    assert clock() == start + 501

    real = StoreHandles(lambda namespace, options: _open_real(backends, namespace, options))
    target = await real.now() + 30
    await real.wait_past(target)
    assert await real.now() > target
    assert backends.get(real.namespace) is None  # the test's namespace was never used
    await real.aclose()


async def _open_real(
    backends: dict[str, MemoryBackend], namespace: str, options: StoreOptions
) -> Store:
    return MemoryTaskStore(options, backend=backends.setdefault(namespace, MemoryBackend()))

"""StoreHandles: fresh, schema-safe namespaces, and every handle closed at teardown."""

from __future__ import annotations

import re

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions, StoreUnavailable
from mcp_tasks_contract import StoreHandles, new_namespace

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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

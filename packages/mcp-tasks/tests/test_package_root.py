"""The package root: every name it exports resolves, to its module's own object."""

from __future__ import annotations

import importlib
import subprocess
import sys

import mcp_tasks


def test_every_export_resolves_to_its_defining_module() -> None:
    """`mcp_tasks.NAME` for each name of `__all__` is the object its module defines."""
    for name in mcp_tasks.__all__:
        value = getattr(mcp_tasks, name)
        module = importlib.import_module(mcp_tasks._EXPORTS[name])
        assert value is getattr(module, name), name
    assert sorted(mcp_tasks.__all__) == sorted(mcp_tasks._EXPORTS)


def test_importing_the_root_loads_nothing_else() -> None:
    """`import mcp_tasks` alone imports no SDK: each name loads on first use."""
    code = (
        "import sys, mcp_tasks; heavy = {'mcp', 'mcp_types', 'anyio', 'pydantic'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"

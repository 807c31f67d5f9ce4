"""The package root: every public name of the SQL layer's modules is exported, as its
module's own object."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import mcp_tasks_sql

PACKAGE = Path(mcp_tasks_sql.__file__).parent
#: Test helpers (they need Hypothesis, a test dependency): imported by tests only.
NOT_EXPORTED = frozenset({"testing"})


def public_names(module: Path) -> set[str]:
    """The names ``module`` defines at its top level without a leading underscore, but for
    type variables."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            is_type_variable = (
                isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "TypeVar"
            )
            if not is_type_variable:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_is_exported_as_its_modules_object() -> None:
    """`mcp_tasks_sql.__all__` lists each public name of every module but the test helpers
    (and nothing else), and `mcp_tasks_sql.NAME` is the object its module defines."""
    defined: dict[str, str] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem != "__init__" and path.stem not in NOT_EXPORTED:
            defined |= dict.fromkeys(public_names(path), path.stem)
    assert sorted(mcp_tasks_sql.__all__) == sorted(defined)
    for name, module in defined.items():
        owner = importlib.import_module(f"mcp_tasks_sql.{module}")
        assert getattr(mcp_tasks_sql, name) is getattr(owner, name), name

"""Module boundaries: no module of mcp_tasks reaches into another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_tasks

PACKAGE_ROOT = Path(mcp_tasks.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _violations() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        module = _module_name(path)
        package = _package_of(module, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                continue
            source = node.module
            if not source.startswith("mcp_tasks"):
                continue
            source_package = source.rpartition(".")[0]
            # A private module is shared only with its own package's siblings.
            private_module = any(part.startswith("_") for part in source.split("."))
            if private_module and source_package != package:
                found.append(f"{module} imports private module {source}")
            # A subpackage's internals are its own: outsiders use what it exports.
            if source.startswith("mcp_tasks.engine.core") and package != "mcp_tasks.engine":
                found.append(f"{module} reaches into {source}; import from mcp_tasks.engine")
            found.extend(
                f"{module} imports private name {alias.name} from {source}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            )
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """Every cross-module import in mcp_tasks names a public name of a public module, and
    adapters take engine names from ``mcp_tasks.engine``, not from its ``core`` module."""
    assert _violations() == []

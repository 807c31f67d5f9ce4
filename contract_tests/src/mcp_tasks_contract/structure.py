"""Structural checks: a store has every Store operation and no way to enumerate tasks."""

from __future__ import annotations

import inspect
import re
from typing import Final

from mcp_tasks import STORE_OPERATIONS, Store

# Words that would name a way to enumerate tasks (S-NOLIST): task ids are bearer capabilities.
ENUMERATION: Final = re.compile(
    r"(^|_)(list|lists|scan|iter|iterate|count|keys|all|find|search|query|enumerate|ids|"
    r"tasks|owners|select|browse|dump|export|items|values)($|_)"
)


def protocol_operations() -> tuple[str, ...]:
    """The public methods the ``Store`` protocol declares, in declaration order."""
    return tuple(
        name for name, value in vars(Store).items() if not name.startswith("_") and callable(value)
    )


def enumeration_methods(obj: object) -> list[str]:
    """Public attributes of ``obj`` whose names suggest listing, scanning or counting tasks."""
    return sorted(
        name for name in dir(obj) if not name.startswith("_") and ENUMERATION.search(name)
    )


def _shape(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    """Names, kinds and defaults (annotations may be spelled differently and still agree)."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


def operation_problems(store: object) -> list[str]:
    """What keeps ``store`` (a class or a handle) from implementing every Store operation."""
    problems: list[str] = []
    for name in STORE_OPERATIONS:
        method = getattr(store, name, None)
        if method is None:
            problems.append(f"{name}: missing")
            continue
        if not inspect.iscoroutinefunction(method):
            problems.append(f"{name}: not an async method")
            continue
        expected = _shape(inspect.signature(getattr(Store, name)))
        actual = _shape(inspect.signature(method))
        if actual != expected:
            problems.append(f"{name}: signature {actual} differs from the protocol's {expected}")
    return problems

"""Fixtures of the docs tests: the Get started server, built from the page's own code."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import pytest
from markdown_blocks import REPO, titled

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

GET_STARTED = REPO / "docs" / "get-started.md"


def write_tour(folder: Path) -> None:
    """hello.py and client.py exactly as Get started shows them, written into ``folder``."""
    for name in ("hello.py", "client.py"):
        (folder / name).write_text(titled(GET_STARTED, name).text, encoding="utf-8")


@pytest.fixture
def hello(tmp_path: Path) -> ModuleType:
    """The module hello.py of Get started, imported from the page's text."""
    write_tour(tmp_path)
    spec = importlib.util.spec_from_file_location("hello", tmp_path / "hello.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""A page read on the repository (not the built site) is not empty: a page whose text the
site includes from another file, or generates from docstrings, says where to read it; the
README says how to serve the built site (opened from disk, its search finds nothing)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from markdown_blocks import REPO

if TYPE_CHECKING:
    from pathlib import Path

DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
INCLUDE = re.compile(r'\{%\s*include-markdown\s+"([^"]+)"[^%]*%\}')
GENERATED = re.compile(r"^::: .*$", re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_a_page_says_where_its_included_or_generated_text_lives(page: Path) -> None:
    """Every file the page includes is named on it as a repository path, and a page of
    ``:::`` lines names the sources they render; either way it has words of its own."""
    text = page.read_text(encoding="utf-8")
    own = GENERATED.sub("", INCLUDE.sub("", text))
    assert len(re.findall(r"[A-Za-z]{2,}", own)) >= 15, f"{page}: no words of its own"
    for included in INCLUDE.findall(text):
        path = (page.parent / included).resolve().relative_to(REPO)
        assert f"`{path}`" in own, f"{page} includes {path} without naming it"
    if GENERATED.search(text):
        assert "packages/mcp-tasks/src" in own
        assert "python -m http.server -d site" in own


def test_the_readme_says_how_to_serve_the_site() -> None:
    """The built site is read served, not opened from disk (where search finds nothing)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "python -m http.server -d site" in readme
    about = (DOCS / "about.md").read_text(encoding="utf-8")
    assert "python -m http.server -d site" in about

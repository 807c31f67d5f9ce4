"""The release surface of every distribution: one version, one licence, complete metadata.

VERSION at the repository root is the version; every distribution's ``[project].version``
and every pin of one of our distributions on another (``mcp-tasks-sql==X``, the extras'
``mcp-tasks-sqlite==X``) must be it. ``uv run nox -s set-version -- X`` writes it everywhere.
The licence every pyproject declares is the text of LICENSE, which each distribution ships
(a copy in its folder, since a wheel or sdist holds only its own folder).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PROJECTS = sorted([*REPO.glob("packages/*/pyproject.toml"), REPO / "contract_tests/pyproject.toml"])
VERSION = (REPO / "VERSION").read_text(encoding="utf-8").strip()
#: Every field a distribution's metadata must carry for the package index.
REQUIRED = ("name", "version", "description", "readme", "requires-python", "license", "authors")


def project(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]


OURS = {project(path)["name"] for path in PROJECTS}


def requirements(meta: dict) -> list[Requirement]:
    found = [Requirement(r) for r in meta.get("dependencies", [])]
    for extra in meta.get("optional-dependencies", {}).values():
        found += [Requirement(r) for r in extra]
    return found


def test_version_is_one_semantic_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?", VERSION)


@pytest.mark.parametrize("path", PROJECTS, ids=lambda p: p.parent.name)
def test_every_distribution_and_sibling_pin_has_the_one_version(path: Path) -> None:
    """The distribution's version is VERSION, and so is every pin on a sibling."""
    meta = project(path)
    assert meta["version"] == VERSION
    for requirement in requirements(meta):
        if requirement.name in OURS and requirement.specifier:
            assert str(requirement.specifier) == f"=={VERSION}", f"{path}: {requirement}"


@pytest.mark.parametrize("path", PROJECTS, ids=lambda p: p.parent.name)
def test_every_distribution_has_complete_metadata(path: Path) -> None:
    """Name, version, a description, the package's own README, the Python range, the
    licence of LICENSE shipped beside it, authors, keywords, classifiers and py.typed."""
    meta = project(path)
    folder = path.parent
    for field in REQUIRED:
        assert meta.get(field), f"{path}: no {field}"
    assert meta["license"] == "Apache-2.0"
    assert (REPO / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")
    assert (folder / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    readme = (folder / meta["readme"]).read_text(encoding="utf-8")
    assert readme.startswith(f"# {meta['name']}\n")
    assert len(meta["description"]) > 20
    assert meta["keywords"]
    classifiers = meta["classifiers"]
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression says it
    packages = list((folder / "src").glob("*/__init__.py"))
    assert len(packages) == 1
    assert (packages[0].parent / "py.typed").exists()


def test_the_changelog_has_the_version() -> None:
    """CHANGELOG.md has a section for VERSION."""
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{VERSION}]" in changelog

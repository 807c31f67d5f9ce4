"""Only extras that exist are named, anywhere.

An extra of mcp-tasks is a key of ``[project.optional-dependencies]`` in
packages/mcp-tasks/pyproject.toml. Every ``mcp-tasks[...]`` in the repository's text files
(docs, READMEs, examples, sources, tests, pyproject comments) names only those; so does every
other ``[extra]`` on such a line (``# or [postgres]``) and every `` `[extra]` `` in Markdown;
``all`` brings every other extra; and the install line ``store_from_url`` prints for a
missing store names an extra that exists.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from mcp_tasks import UnknownStoreScheme, store_from_url
from mcp_tasks.stores import opening

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "packages" / "mcp-tasks" / "pyproject.toml"

TEXT_SUFFIXES = {".md", ".py", ".toml", ".txt", ".rst", ".cfg", ".ini", ".yaml", ".yml", ".sh"}
NOT_OURS = {".git", ".venv", ".nox", ".cache", ".mypy_cache", ".ruff_cache", "node_modules"}
NOT_OURS |= {"dist", "site", "results", "__pycache__", ".hypothesis"}

MENTION = re.compile(r"mcp-tasks\[([^\]]*)\]")
# `[postgres]` on its own (not `name[...]`, not a Markdown link `[text](url)`).
BARE = re.compile(r"(?<![\w\]\[-])\[([a-z][a-z0-9_-]*(?:,\s*[a-z][a-z0-9_-]*)*)\](?!\()")
TICKED = re.compile(r"`\[([a-z][a-z0-9_-]*(?:,\s*[a-z][a-z0-9_-]*)*)\]`")


def extras() -> dict[str, list[str]]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return dict(project["optional-dependencies"])


def text_files() -> list[Path]:
    found = []
    for folder, subfolders, names in os.walk(REPO):
        subfolders[:] = sorted(name for name in subfolders if name not in NOT_OURS)
        for name in sorted(names):
            path = Path(folder) / name
            if path == Path(__file__).resolve():  # names missing extras on purpose
                continue
            if path.suffix in TEXT_SUFFIXES or path.relative_to(REPO).parts[0] == ".ci":
                found.append(path)
    return found


def named_extras(line: str, markdown: bool) -> list[str]:
    """The extras a line names (a `{...}` template names none of its own)."""
    groups = [group for group in MENTION.findall(line) if "{" not in group]
    if "mcp-tasks[" in line or "pip install" in line:
        groups += BARE.findall(line)
    if markdown:
        groups += TICKED.findall(line)
    return [name.strip() for group in groups for name in group.split(",") if name.strip()]


def test_every_extra_named_anywhere_exists() -> None:
    """Docs, READMEs, examples, sources and tests name only extras that exist."""
    known = extras().keys()
    files = text_files()
    assert REPO / "README.md" in files
    assert PYPROJECT in files
    unknown = [
        f"{path.relative_to(REPO)}:{number}: [{name}]"
        for path in files
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        )
        for name in named_extras(line, markdown=path.suffix == ".md")
        if name not in known
    ]
    assert unknown == []


def test_the_line_scanner_finds_what_it_should() -> None:
    """The scanner of the test above sees extras in the forms the docs write them."""
    line = 'pip install "mcp-tasks[sqlite, postgres]"   # or [redis]; see [the docs](x.md)'
    assert named_extras(line, markdown=False) == ["sqlite", "postgres", "redis"]
    assert named_extras("needs `[mongodb]`", markdown=True) == ["mongodb"]
    assert named_extras("f'pip install \"mcp-tasks[{extra}]\"'", markdown=False) == []
    assert named_extras("items[0] and store[key]", markdown=False) == []


def test_all_brings_every_other_extra() -> None:
    """`all` is every other extra, so a new sibling's extra must join it."""
    declared = extras()
    requirements = [Requirement(text) for text in declared["all"]]
    assert [str(r) for r in requirements if r.name != "mcp-tasks"] == []  # it forwards
    brought = set().union(*(requirement.extras for requirement in requirements))
    assert brought == declared.keys() - {"all"}


@pytest.mark.parametrize(
    "url",
    [
        "mongodb://127.0.0.1:27017/db",
        "mongodb+srv://cluster.example/db",
        "nosuchstore://x",
    ],
)
def test_a_missing_store_hint_names_only_extras_that_exist(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """store_from_url's error for a store that is not installed names no missing extra (the
    entry points emptied, so every store here counts as not installed)."""
    monkeypatch.setattr(opening, "entry_points", lambda **_: [])
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    named = [name for group in MENTION.findall(str(caught.value)) for name in group.split(",")]
    assert [name for name in named if name.strip() not in extras()] == []

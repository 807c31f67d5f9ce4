"""docs/architecture.md, checked: its layer diagram is the one import-linter enforces
(pyproject.toml's ``layers`` contract, in order), and its `cli` layer names every command
`mcp-tasks --help` lists. Its other block is a drawing of a request's path."""

from __future__ import annotations

import re
import tomllib
from typing import TYPE_CHECKING

from markdown_blocks import REPO, PageBlocks
from transcripts import run

if TYPE_CHECKING:
    from pathlib import Path

PAGE = PageBlocks("docs/architecture.md")
PAGE.explain("client ──HTTP──▶", "a drawing of one request's path through the layers")
LAYERS = PAGE.take("testing              running(app)")


def diagram_layers() -> list[str]:
    """The diagram's layers, top down: each line's name column (``tasks │ client`` is one)."""
    names = []
    for line in LAYERS.text.splitlines():
        name = line[:21].strip()
        if name and name != "│":
            names.append(" | ".join(part.strip() for part in name.split("│")))
    return names


def test_the_layers_are_import_linters_in_order() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [contract for contract in contracts if contract.get("id") == "layers"]
    assert diagram_layers() == layers["layers"]


def test_the_cli_layer_names_every_command(tmp_path: Path) -> None:
    code, output = run("mcp-tasks --help", tmp_path)
    assert code == 0, output
    listed = re.findall(r"^    (\w+) ", output, re.M)
    cli = LAYERS.text.split("\n │", 1)[0].removeprefix("cli").strip()
    shown = [word.strip() for word in cli.removeprefix("mcp-tasks").split("|")]
    assert shown == listed

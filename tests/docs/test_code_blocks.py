"""The Python blocks of the docs pages run as they are written.

A page is either covered, every Python block on it executed here (or, for a block titled
as a file, run by the scenario test that follows the page: test_get_started), or listed in
NOT_YET_COVERED with the reason; a page that is neither fails. The raw HTTP exchanges are
test_wire_examples's; the Mermaid blocks are rendered by test_site.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from markdown_blocks import REPO, Block, blocks

if TYPE_CHECKING:
    from pathlib import Path

#: Pages whose Python blocks all run.
COVERED = [
    "README.md",
    "docs/index.md",
    "docs/get-started.md",
    "docs/concepts.md",
    "docs/guides/index.md",
    "docs/stores/index.md",
    "docs/reference/wire.md",
    "docs/about.md",
    "docs/operations.md",
    "packages/mcp-tasks/README.md",
    "packages/mcp-tasks-sqlite/README.md",
    "packages/mcp-tasks-postgres/README.md",
    "packages/mcp-tasks-redis/README.md",
    "packages/mcp-tasks-mongodb/README.md",
    "packages/mcp-tasks-sql/README.md",
]

#: Pages whose blocks are fragments of a larger program (they use names an earlier block
#: or the reader's own app defines), not yet made runnable: page → why.
NOT_YET_COVERED = {
    "docs/serving-tasks.md": "fragments that continue the first block's `tasks` and `mcp`",
    "docs/fastmcp.md": "fragments of a FastMCP app",
    "docs/client.md": "a client of a server the page does not start",
    "docs/cli.md": "shell transcripts of a running server",
    "docs/architecture.md": "design notes; its blocks are diagrams and signatures",
    "docs/store-contract.md": "signatures of the Store protocol (the contract suite tests them)",
    "docs/performance.md": "commands of the benchmark suite (nox -s bench)",
    "docs/reference/api.md": "generated from docstrings; their examples are not executed yet",
    "docs/monitoring.md": "shell set-ups of an exporter (test_monitoring_setup runs the local "
    "one; the collector's needs a collector)",
}

#: Blocks titled as files: the scenario test that follows the page runs them.
RUN_BY_SCENARIO = {("docs/get-started.md", "hello.py"), ("docs/get-started.md", "client.py")}


def python_blocks() -> list[Block]:
    return [block for page in COVERED for block in blocks(REPO / page, "python")]


def test_every_docs_page_is_covered_or_says_why_not() -> None:
    """Each Markdown page of the site (and each package README it includes) is covered or
    listed with its reason; nothing is both, and nothing listed is missing."""
    pages = {str(path.relative_to(REPO)) for path in (REPO / "docs").rglob("*.md")}
    pages -= {"docs/changelog.md"}  # includes CHANGELOG.md, which has no code
    pages |= {
        f"packages/{path.parent.name}/README.md" for path in REPO.glob("packages/*/README.md")
    }
    pages |= {"README.md"}
    stores = {
        f"docs/stores/{name}.md" for name in ("sqlite", "postgres", "redis", "mongodb", "sql")
    }
    pages -= stores  # each is one include of a package README, covered above
    assert set(COVERED).isdisjoint(NOT_YET_COVERED)
    assert pages == set(COVERED) | set(NOT_YET_COVERED)


def test_blocks_titled_as_files_are_run_by_a_scenario() -> None:
    """A titled Python block on a covered page is one a scenario test runs."""
    titled = {
        (str(block.page.relative_to(REPO)), block.title) for block in python_blocks() if block.title
    }
    assert titled == RUN_BY_SCENARIO


@pytest.mark.parametrize("block", [block for block in python_blocks() if not block.title], ids=str)
def test_the_python_block_runs(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block, executed as a module in an empty folder, raises nothing."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "docs_example"}
    exec(compile(block.text, str(block), "exec"), namespace)  # the docs' own code
    defined = [name for name in namespace if not name.startswith("__")]
    assert defined, "the block defined nothing: a block that ran empty proves nothing"

"""Every docs page's examples run as they are written; this module says where.

A page (or package README) is in exactly one of three lists, else this test fails:

* ``COVERED``: every Python block on it is a whole program, executed here (a block titled
  as a file is run by the scenario test that follows the page: ``RUN_BY_SCENARIO``). Its
  other blocks: Get started's commands and outputs are test_get_started's, the wire
  page's exchanges and curl test_wire_examples'; the rest install from the package index
  (``pip install …``, not published yet; tests/packaging installs from wheels) or run
  this session (``nox -s docs``).
* ``SCENARIOS``: page → the test module in tests/docs that runs its blocks. That module
  builds ``PAGE = PageBlocks("docs/….md")`` (markdown_blocks) and, at import, ``take``s
  each block it runs (a fragment runs inside a program made of the page's blocks and the
  least glue, ``program`` and ``run_program``) and ``explain``s each one it cannot run
  here, with the reason; a block of the page that is neither fails
  ``test_every_block_of_a_scenario_page_is_run_or_explained``.
* ``NOT_YET_COVERED``: page → why not yet.

A command transcript (a ``text`` block whose first line is ``$ COMMAND``) is compared with
a fresh run of the command (transcripts.py: what is normalised, and how a failure shows
today's output to paste). The Mermaid blocks are rendered by test_site.
"""

from __future__ import annotations

import importlib
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
    "docs/guides/lowlevel-server.md",
    "docs/guides/stdio.md",
    "docs/guides/manual-mode.md",
    "docs/guides/many-processes.md",
    "docs/guides/migrating-from-fastmcp-tasks.md",
    "docs/stores/index.md",
    "docs/stores/writing-a-store.md",
    "docs/reference/wire.md",
    "docs/about.md",
    "docs/operations.md",
    "docs/troubleshooting.md",
    "docs/deployment.md",
    "packages/mcp-tasks/README.md",
    "packages/mcp-tasks-sqlite/README.md",
    "packages/mcp-tasks-postgres/README.md",
    "packages/mcp-tasks-redis/README.md",
    "packages/mcp-tasks-mongodb/README.md",
    "packages/mcp-tasks-sql/README.md",
]

#: Pages whose blocks a scenario module runs (or explains): page → module in tests/docs.
SCENARIOS = {
    "docs/serving-tasks.md": "test_serving_tasks",
    "docs/fastmcp.md": "test_fastmcp",
    "docs/client.md": "test_client",
    "docs/reference/api.md": "test_api_examples",
    "docs/cli.md": "test_cli_page",
    "docs/monitoring.md": "test_monitoring_page",
    "docs/architecture.md": "test_architecture_page",
    "docs/store-contract.md": "test_store_contract_page",
    "docs/performance.md": "test_performance_page",
}

#: Pages not made runnable yet: page → why.
NOT_YET_COVERED: dict[str, str] = {}

#: Blocks titled as files: the scenario test that follows the page runs them
#: (test_get_started; the guides' in test_guides).
RUN_BY_SCENARIO = {
    ("docs/get-started.md", "hello.py"),
    ("docs/get-started.md", "client.py"),
    ("docs/guides/lowlevel-server.md", "server.py"),
    ("docs/guides/stdio.md", "server.py"),
    ("docs/guides/stdio.md", "start.py"),
    ("docs/guides/stdio.md", "finish.py"),
    ("docs/guides/manual-mode.md", "server.py"),
    ("docs/guides/manual-mode.md", "worker.py"),
    ("docs/guides/many-processes.md", "app.py"),
    ("docs/guides/many-processes.md", "client.py"),
    ("docs/guides/migrating-from-fastmcp-tasks.md", "server.py"),
    ("docs/guides/migrating-from-fastmcp-tasks.md", "client.py"),
    ("docs/deployment.md", "healthcheck.py"),  # test_deployment
}


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
    lists = [set(COVERED), set(SCENARIOS), set(NOT_YET_COVERED)]
    assert sum(map(len, lists)) == len(set.union(*lists)), "a page is in two lists"
    assert pages == set.union(*lists)


@pytest.mark.parametrize("page", sorted(SCENARIOS))
def test_every_block_of_a_scenario_page_is_run_or_explained(page: str) -> None:
    """The page's scenario module takes or explains each of the page's blocks."""
    scenario = importlib.import_module(SCENARIOS[page]).PAGE
    assert scenario.page == REPO / page
    assert [str(block) for block in scenario.unaccounted()] == []


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

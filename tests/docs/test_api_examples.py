"""The examples in the docstrings docs/reference/api.md renders (mkdocstrings), run.

Every object a ``::: path`` line of the page names, and each public member of it, is
searched for fenced Python blocks; each block found must be one ``EXAMPLES`` runs, keyed
by the object whose docstring holds it. Like the pages' fragments, an example runs inside
a program with the least glue: the imports the docstring leaves out, and a live server.
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from typing import TYPE_CHECKING, Any

from markdown_blocks import Block, PageBlocks, blocks_in, program, run_program

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    import pytest

PAGE = PageBlocks("docs/reference/api.md")  # no blocks of its own: only ::: lines
API_PAGE = PAGE.page
PAGE_URL = '"http://127.0.0.1:8000/mcp"'


def rendered_objects() -> list[str]:
    """The dotted paths the page's ``:::`` lines render."""
    return re.findall(r"^::: ([\w.]+)", API_PAGE.read_text(encoding="utf-8"), re.M)


def resolve(path: str) -> Any:
    """The module, or the attribute of the longest importable module prefix, at ``path``."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise LookupError(path)


def documented(path: str) -> dict[str, Any]:
    """``path``'s object and the public functions and classes defined in it (what
    mkdocstrings renders), by dotted path."""
    top = resolve(path)
    found = {path: top}
    home = top.__name__ if inspect.ismodule(top) else top.__module__
    for name, member in vars(top).items():
        public = not name.startswith("_") and (
            inspect.isfunction(member) or inspect.isclass(member)
        )
        if public and member.__module__ == home:
            found[f"{path}.{name}"] = member
    return found


def docstring_blocks() -> dict[str, list[Block]]:
    """The fenced Python blocks of each rendered docstring that has any, by object path."""
    found = {}
    for path in rendered_objects():
        for name, member in documented(path).items():
            doc = inspect.cleandoc(member.__doc__ or "")  # its own, not an inherited one
            python = blocks_in(doc, API_PAGE, "python")
            if python:
                found[name] = python
    return found


def test_every_docstring_example_is_one_this_module_runs() -> None:
    assert set(docstring_blocks()) == set(EXAMPLES)
    assert all(len(found) == 1 for found in docstring_blocks().values())


def the_example(path: str) -> str:
    (block,) = docstring_blocks()[path]
    return block.text


def test_the_tasks_example_serves_build_as_a_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Tasks`' example, with its imports, on its SQLite file: a `build` call is a task that
    completes."""
    monkeypatch.chdir(tmp_path)
    imports = """
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks, store_from_url
"""
    call = """
import anyio

from mcp_tasks.client import TaskHandle
from mcp_tasks.testing import running, start_tool, tasks_client


async def call_build():
    async with running(mcp) as url, tasks_client(url) as client:
        handle = await start_tool(client, "build", {"ref": "main"})
        assert isinstance(handle, TaskHandle)
        final = await handle.wait()
        assert final.status == "completed", final


anyio.run(call_build)
"""
    run_program(program(imports, the_example("mcp_tasks.tasks.Tasks"), call), "tasks_example")
    assert (tmp_path / "tasks.db").is_file()


def test_the_client_module_example_watches_a_task_to_its_end(
    hello: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp_tasks.client`'s example, with its imports, against Get started's hello.py on a
    free port: it prints each state to `completed`."""
    example = the_example("mcp_tasks.client")
    assert example.count(PAGE_URL) == 1
    body = textwrap.indent(example.replace(PAGE_URL, "url"), "        ")
    glue = f"""
import anyio

from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.testing import running


async def main():
    async with running(hello.mcp) as url:
{body}


anyio.run(main)
"""
    run_program(glue, "client_module_example", hello=hello)
    assert capsys.readouterr().out.splitlines()[-1] == "completed Counting (3/3)"


#: The object whose docstring holds an example → the test that runs it.
EXAMPLES = {
    "mcp_tasks.tasks.Tasks": test_the_tasks_example_serves_build_as_a_task,
    "mcp_tasks.client": test_the_client_module_example_watches_a_task_to_its_end,
}

"""docs/client.md, run: its client block, against the Get started server (hello.py, from
that page's own code), follows the `count` task to its end and reads its result."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from markdown_blocks import PageBlocks, program, run_program

if TYPE_CHECKING:
    from types import ModuleType

    import pytest

PAGE = PageBlocks("docs/client.md")
CLIENT = PAGE.take("result = (await started.get()).call_tool_result()")
PUSHED = PAGE.take("handle = TaskHandle.attach(client, task_id)")
PAGE_URL = '"http://127.0.0.1:8000/mcp"'


def test_the_client_block_follows_a_task_to_its_result(
    hello: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The block runs in an async function (top-level `await` is the page's shorthand), on
    the URL of a live hello.py instead of port 8000; it prints each state and gets the
    task's result."""
    assert CLIENT.text.count(PAGE_URL) == 1
    body = textwrap.indent(CLIENT.text.replace(PAGE_URL, "url"), "        ")
    glue = f"""
import anyio

from mcp_tasks.testing import running


async def main():
    async with running(hello.mcp) as url:
{body}
    return result


result = anyio.run(main)
"""
    namespace = run_program(program(glue), "client_page", hello=hello)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "completed Counting (3/3)", printed
    assert namespace["result"].content[0].text == "counted to 3"  # type: ignore[attr-defined]


def test_the_push_block_follows_a_task_resumed_by_id(
    hello: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The block runs against a live hello.py: the handle attached by id prints each state
    the server pushes, to completed."""
    assert PUSHED.text.count(PAGE_URL) == 1
    body = textwrap.indent(PUSHED.text.replace(PAGE_URL, "url"), "        ")
    glue = f"""
import anyio

from mcp_tasks.testing import running


async def main():
    async with running(hello.mcp) as url:
{body}


anyio.run(main)
"""
    run_program(program(glue), "client_page_push", hello=hello)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("working"), printed
    assert printed[-1] == "completed Counting (3/3)", printed

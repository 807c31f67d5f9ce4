"""`mcp-tasks call --answer` is held to the question before it is sent: an answer whose
field has the wrong type, a required field missing or a key the form does not ask is one
line naming the field (exit 2), and the tool's body never sees it; the prompt asks a
field again until its value fits."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.cli.follow import Answerer, Console
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from collections.abc import Mapping

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["colour"],
}
ASK = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Colour?", "requestedSchema": SCHEMA},
}
FIELDS = "the form's fields: colour (string, required), count (integer)"


def painter(seen: list[Any]) -> MCPServer[Any]:
    tasks = Tasks()
    mcp: MCPServer[Any] = MCPServer(
        "paint", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="optional")
    async def paint(ctx: TaskContext) -> str:
        answer = await ctx.elicit("colour", "Colour?", SCHEMA)
        seen.append(answer)
        return "painted"

    def ask_first(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any]:
        return {} if "colour" in answers else {"colour": ASK}

    @tasks.tool(mcp, mode="optional", preflight=ask_first)
    async def paint_after_preflight(ctx: TaskContext) -> str:
        seen.append(ctx.input_responses["colour"])
        return "painted"

    return mcp


async def call(*args: str) -> tuple[int, str]:
    result = await anyio.run_process(
        [sys.executable, "-m", "mcp_tasks.cli", "call", *args], check=False, stdin=None
    )
    return result.returncode, result.stderr.decode()


@pytest.mark.parametrize("tool", ["paint", "paint_after_preflight"])
@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ('colour={"colour": 5}', "field 'colour': 5 is not of type 'string'"),
        ("colour={}", "'colour' is a required property"),
        (
            'colour={"color": "red"}',
            "unknown field 'color' (the form asks for 'colour', 'count'); "
            "'colour' is a required property",
        ),
    ],
    ids=["wrong-type", "missing", "unknown-key"],
)
async def test_an_answer_that_does_not_fit_is_one_line_and_exit_2(
    tool: str, answer: str, why: str
) -> None:
    """In a task's input round and in a round before the task exists alike."""
    seen: list[Any] = []
    async with running(painter(seen)) as url:
        code, err = await call(url, tool, "--answer", answer)
    assert code == 2, err
    lines = err.splitlines()
    assert f"mcp-tasks call: --answer colour does not fit the question: {why}" in lines
    assert lines[-1] == FIELDS
    assert "Traceback" not in err
    assert seen == []


async def test_an_answer_that_fits_is_sent() -> None:
    """The check lets a fitting answer through: the body gets it."""
    seen: list[Any] = []
    async with running(painter(seen)) as url:
        code, err = await call(url, "paint", "--answer", 'colour={"colour": "red", "count": 2}')
    assert code == 0, err
    assert seen == [{"action": "accept", "content": {"colour": "red", "count": 2}}]


class Typed(Answerer):
    """An Answerer whose terminal is these lines, typed in turn."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__({}, Console(io.StringIO()), interactive=True)
        self.lines = lines

    async def _read_line(self, prompt: str) -> str:
        self.console.write(prompt)
        return self.lines.pop(0)


async def test_the_prompt_asks_a_field_again_until_its_value_fits() -> None:
    """`count` 0 is below the schema's minimum: said, and asked again; 3 is taken."""
    answerer = Typed(["red", "0", "3"])
    answer = await answerer._fields(SCHEMA)
    assert answer == {"action": "accept", "content": {"colour": "red", "count": 3}}
    shown = answerer.console.stream.getvalue()  # type: ignore[attr-defined]
    assert "field 'count': 0 is less than the minimum of 1; again (empty: decline)" in shown

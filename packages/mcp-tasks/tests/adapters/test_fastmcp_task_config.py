"""FastMCP task options are checked before the server serves: a wrong type is refused at
start-up, naming the tool and the field, not answered -32603 on every call."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig

from mcp_tasks import Tasks
from mcp_tasks.stores.memory import MemoryTaskStore

pytestmark = pytest.mark.anyio


async def test_a_float_poll_interval_is_refused_at_start_up_naming_the_field() -> None:
    tasks = Tasks(store=MemoryTaskStore())
    mcp = FastMCP("app")
    mcp.add_extension(tasks.fastmcp_extension())
    wrong: Any = 0.5  # TaskConfig's field is a timedelta; the dataclass does not check

    @mcp.tool(task=TaskConfig(poll_interval=wrong))
    async def crunch(n: int) -> int:
        return n

    with pytest.raises(TypeError) as refused:
        async with mcp._lifespan_manager():  # what every transport enters first
            pass
    assert str(refused.value) == (
        "Tool 'crunch': TaskConfig.poll_interval must be a datetime.timedelta "
        "(e.g. timedelta(seconds=0.5)), got float 0.5"
    )
    assert not tasks.runner.running

"""How the bench serves each row (bench/served.py, bench/stack.py): the ways a user serves
the app, the production stack beside the default one, and each row named by the loop and
HTTP parser its running server reported. The speed itself is measured by ``nox -s bench``."""

from __future__ import annotations

import importlib.util
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

from bench import served
from bench.common import ROOT, Backend

if TYPE_CHECKING:
    from pathlib import Path

MEMORY = Backend("memory", "memory://", "this process")


def importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def rows() -> dict[str, served.Target]:
    python = ROOT / ".cache" / "never-started" / "python"  # the peer's: not run here
    return {t.name: t for t in served.targets([MEMORY], python)}


def test_the_production_stack_doubles_ours_the_peer_and_both_floors() -> None:
    """Each of ours on memory, the peer on memory and the two floors has a second row on
    uvloop and httptools, on its own port; our memory server also runs under
    `mcp-tasks serve`. Those rows are section 1's alone (capacity, idle CPU)."""
    found = rows()
    for name in ("memory", served.PEER, served.SDK, served.BARE):
        default, production = found[name], found[name + served.UVLOOP]
        assert not default.capacity_only
        assert "--stack" not in default.argv
        assert production.argv[-2:] == ["--stack", "uvloop"]
        assert production.port != default.port
        assert str(production.port) in production.argv
        assert production.capacity_only
    serve = found[served.SERVE]
    assert serve.way == served.MCP_TASKS_SERVE
    assert serve.argv[1:3] == ["serve", "bench.serve_app:mcp"]
    assert serve.capacity_only


@pytest.mark.parametrize("name", [served.BARE, served.SERVE])
def test_each_row_is_named_by_the_stack_its_server_reports(name: str, tmp_path: Path) -> None:
    """The bare floor under uvicorn.run (asyncio and h11, asked for) and our server under
    `mcp-tasks serve` (the loop and parser uvicorn picks, as `uvicorn app:app` does: uvloop
    and httptools when they are installed) each report from inside the running server what
    they run on."""
    target = rows()[name]
    with ExitStack() as servers:
        served.started(servers, target, tmp_path)
    auto_loop = "uvloop" if importable("uvloop") else "asyncio"
    auto_parser = "httptools" if importable("httptools") else "h11"
    expected = {
        served.BARE: ("uvicorn.run", {"loop": "asyncio", "http": "h11"}),
        served.SERVE: ("mcp-tasks serve", {"loop": auto_loop, "http": auto_parser}),
    }[name]
    assert (target.way, target.stack) == expected
    stack = expected[1]
    assert target.label == f"{expected[0]} · {stack['loop']} loop · {stack['http']}"

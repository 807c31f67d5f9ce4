"""docs/performance.md has no code blocks: its figures come from the benchmark suite, whose
full run takes many minutes of a quiet machine (`nox -s bench`; a measurement, never a
check). Its commands, written inline, are checked to exist with the options it gives them:
each ``python -m bench.NAME`` module answers ``--help`` with every ``--option`` the page
passes it, and each ``nox -s NAME`` is a session of noxfile.py."""

from __future__ import annotations

import re

import pytest
from markdown_blocks import REPO, PageBlocks
from transcripts import run

PAGE = PageBlocks("docs/performance.md")
TEXT = PAGE.page.read_text(encoding="utf-8")
#: Inline commands: ``python -m bench.NAME …`` up to the closing backtick.
MODULE_COMMANDS = re.findall(r"python -m (bench\.[a-z_]+)([^`]*)`", TEXT)


def test_the_page_names_its_commands() -> None:
    assert PAGE.blocks == []
    assert {module for module, _ in MODULE_COMMANDS} >= {"bench.run", "bench.create_tail"}


#: ``nox -s bench -- ARGS`` passes ARGS to bench.run (noxfile.py's bench session).
NOX_BENCH_ARGS = re.findall(r"nox -s bench -- ([^`]*)`", TEXT)


@pytest.mark.parametrize("module", sorted({module for module, _ in MODULE_COMMANDS}))
def test_each_bench_module_takes_the_options_the_page_gives_it(module: str) -> None:
    given = [rest for name, rest in MODULE_COMMANDS if name == module]
    if module == "bench.run":
        given += NOX_BENCH_ARGS
    options = {option for rest in given for option in re.findall(r"--[a-z-]+", rest)}
    code, output = run(f"python -m {module} --help", REPO)
    assert code == 0, output
    for option in options:
        assert option in output, f"{module} --help names no {option}:\n{output}"


def test_each_nox_session_the_page_names_exists() -> None:
    sessions = set(re.findall(r"nox -s ([a-z-]+)", TEXT))
    noxfile = (REPO / "noxfile.py").read_text(encoding="utf-8")
    for session in sessions:
        assert re.search(
            rf"^def {session.replace('-', '_')}\(|name=\"{session}\"", noxfile, re.M
        ), session

"""The fenced code blocks of a Markdown page: language, attributes and text, in page order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A fence at any indent (list items indent theirs), its info string, its body, the same fence.
_FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Block:
    """One fenced block: ``language`` (``python``, ``http``, ``bash``…), its ``key="value"``
    attributes (``title``), its text with the fence's indent removed, and where it starts."""

    page: Path
    line: int
    language: str
    attributes: dict[str, str]
    text: str

    @property
    def title(self) -> str:
        return self.attributes.get("title", "")

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line} ({self.language} {self.title})".strip()


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """Every fenced block of ``page`` (of ``language`` only, when given)."""
    return blocks_in(page.read_text(encoding="utf-8"), page, language)


def blocks_in(markdown: str, page: Path, language: str | None = None) -> list[Block]:
    """Every fenced block of the Markdown text ``markdown``, found in ``page``."""
    found = []
    for match in _FENCE.finditer(markdown):
        info = match["info"].strip()
        lang = info.split()[0] if info else ""
        if language is not None and lang != language:
            continue
        indent = len(match["indent"])
        text = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        line = markdown.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, lang, dict(_ATTRIBUTE.findall(info)), text))
    return found


def titled(page: Path, title: str) -> Block:
    """The one block of ``page`` with ``title="…"``."""
    matching = [block for block in blocks(page) if block.title == title]
    if len(matching) != 1:
        raise LookupError(f'{page.relative_to(REPO)} has {len(matching)} blocks titled "{title}"')
    return matching[0]


class PageBlocks:
    """Every fenced block of one page, for the scenario test that runs them: it ``take``s
    each block it runs and ``explain``s each one it cannot run here, with the reason;
    test_code_blocks fails while a block of the page is neither. Mermaid blocks are left
    out: test_site renders them."""

    def __init__(self, page: str) -> None:
        self.page = REPO / page
        self.blocks = [block for block in blocks(self.page) if block.language != "mermaid"]
        self.reasons: dict[int, str] = {}  # index in self.blocks → why not run ("" = run)

    def _find(self, containing: str) -> int:
        found = [i for i, block in enumerate(self.blocks) if containing in block.text]
        if len(found) != 1:
            where = self.page.relative_to(REPO)
            raise LookupError(f"{where} has {len(found)} blocks containing {containing!r}")
        return found[0]

    def take(self, containing: str) -> Block:
        """The one block whose text contains ``containing``, which the caller runs."""
        index = self._find(containing)
        self.reasons[index] = ""
        return self.blocks[index]

    def explain(self, containing: str, reason: str) -> Block:
        """The one block containing ``containing``, not run here for ``reason``."""
        assert reason, "say why the block is not run"
        index = self._find(containing)
        self.reasons[index] = reason
        return self.blocks[index]

    def unaccounted(self) -> list[Block]:
        """The blocks neither taken nor explained."""
        return [block for i, block in enumerate(self.blocks) if i not in self.reasons]


def program(*parts: Block | str) -> str:
    """One Python program: the blocks' texts (and the test's own glue) in order."""
    return "\n\n".join(part.text if isinstance(part, Block) else part for part in parts)


def run_program(source: str, name: str, **given: object) -> dict[str, object]:
    """Execute ``source`` as a module named ``name``, with the ``given`` names defined: its
    namespace."""
    namespace: dict[str, object] = {"__name__": name, **given}
    exec(compile(source, name, "exec"), namespace)  # the docs' own code
    return namespace

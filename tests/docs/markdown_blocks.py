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
    markdown = page.read_text(encoding="utf-8")
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

"""docs/store-contract.md and the rule catalogue name the same rules (both directions), and the
suite's copy of each rule's sentence (``mcp_tasks_contract.rule_text``) is the doc's.

Run this file as a script to write ``rule_text.py`` again from the doc:
``uv run python contract_tests/tests/meta/test_contract_doc.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mcp_tasks_contract import RULES
from mcp_tasks_contract.rule_text import RULE_TEXT

if TYPE_CHECKING:
    from collections.abc import Mapping

# Fenced blocks first (their backticks would pair up wrongly as inline spans), then spans.
FENCED: Final = re.compile(r"^```[^\n]*\n.*?^```", re.DOTALL | re.MULTILINE)
INLINE: Final = re.compile(r"`([^`\n]+)`")
RULE_ID: Final = re.compile(r"(?<![\w-])(S-[A-Z]+(?:\.\d+)?|INV-[A-Z]+)(?![\w])")
# A rule's own heading (`#### `S-PUT.4` Terminal tasks are final`) or table row.
HEADING: Final = re.compile(r"^#{2,6} `((?:S|INV)-[A-Z]+(?:\.\d+)?)` (.+)$")
ROW: Final = re.compile(r"^\| `((?:S|INV)-[A-Z]+(?:\.\d+)?)` \| (.+?) \|")
SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*])")


def repository_root() -> Path:
    """The first folder above this file that holds the workspace (pyproject + contract_tests)."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "pyproject.toml").is_file() and (folder / "contract_tests").is_dir():
            return folder
    raise AssertionError(f"no repository root above {here}")


CONTRACT_DOC: Final = repository_root() / "docs" / "store-contract.md"


def code_spans(doc_text: str) -> list[str]:
    """The text of every fenced code block and every inline code span."""
    blocks = FENCED.findall(doc_text)
    prose = FENCED.sub("", doc_text)
    return blocks + INLINE.findall(prose)


def rule_ids_in(doc_text: str) -> set[str]:
    """Every rule-id-looking token inside backticks."""
    return {match for span in code_spans(doc_text) for match in RULE_ID.findall(span)}


def defined_ids(doc_text: str) -> set[str]:
    """Ids that have their own heading or table row: `` `S-X` `` on a line starting # or |."""
    lines = (line.lstrip() for line in FENCED.sub("", doc_text).splitlines())
    return {
        rule_id
        for line in lines
        if line.startswith(("#", "|"))
        for span in INLINE.findall(line)
        for rule_id in RULE_ID.findall(span)
        if span == rule_id
    }


def first_paragraph(lines: list[str]) -> str:
    """The first paragraph of ``lines`` (a list item's marker dropped), as one line."""
    paragraph: list[str] = []
    for line in (raw.strip() for raw in lines):
        if line.startswith(("#", "|")) or (not line and paragraph):
            break
        if line:
            paragraph.append(line.removeprefix("* "))
    return " ".join(paragraph)


def rule_sentences(doc_text: str) -> dict[str, str]:
    """Each rule's statement in the doc: for a heading, its title and the first sentence
    below it; for a table row (the invariants), its second cell. The first place wins."""
    lines = FENCED.sub("", doc_text).splitlines()
    sentences: dict[str, str] = {}
    for index, line in enumerate(lines):
        if heading := HEADING.match(line):
            rule_id, title = heading.groups()
            first = SENTENCE_END.split(first_paragraph(lines[index + 1 :]))[0]
            sentences.setdefault(rule_id, f"{title}: {first}")
        elif row := ROW.match(line):
            sentences.setdefault(row.group(1), row.group(2))
    return sentences


RULE_TEXT_MODULE: Final = repository_root() / "contract_tests/src/mcp_tasks_contract/rule_text.py"


def python_string(text: str) -> str:
    """``text`` as a string literal the way ruff formats it (double quotes unless the text
    holds one)."""
    return repr(text) if '"' in text else json.dumps(text, ensure_ascii=False)


def rule_text_source(sentences: Mapping[str, str]) -> str:
    """The source of ``mcp_tasks_contract/rule_text.py`` for ``sentences``."""
    entries = "".join(
        f"    {python_string(rule_id)}: {python_string(text)},\n"
        for rule_id, text in sentences.items()
    )
    return (
        "# ruff: noqa: E501 - each rule's sentence is one line, as the doc states it\n"
        '"""Each Store contract rule in the words of docs/store-contract.md (generated from the\n'
        "doc by contract_tests/tests/meta/test_contract_doc.py, which checks they agree).\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Final\n\n"
        "RULE_TEXT: Final[dict[str, str]] = {\n"
        f"{entries}"
        "}\n"
    )


def check(doc_text: str, rules: Mapping[str, str]) -> list[str]:
    """What breaks the mapping: a rule the doc does not define, an id the catalogue lacks."""
    named, defined = rule_ids_in(doc_text), defined_ids(doc_text)
    problems = [f"rule {i} is not in the doc" for i in rules if i not in named]
    problems += [
        f"rule {i} has no heading or table row of its own"
        for i in rules
        if i in named and i not in defined
    ]
    problems += [f"the doc names unknown rule {i}" for i in sorted(named) if i not in rules]
    return problems


def test_the_doc_defines_every_rule_and_names_no_other() -> None:
    """Every id of RULES has a heading or table row in docs/store-contract.md, and every
    rule-id-looking token in the doc's backticks is in RULES."""
    assert CONTRACT_DOC.is_file(), f"missing {CONTRACT_DOC}"
    assert check(CONTRACT_DOC.read_text(encoding="utf-8"), RULES) == []


def test_the_suite_quotes_each_rule_as_the_doc_states_it() -> None:
    """RULE_TEXT holds exactly the doc's rules, each with the doc's own title and first
    sentence, and the catalogue's ids (a failure names a rule in the doc's words)."""
    sentences = rule_sentences(CONTRACT_DOC.read_text(encoding="utf-8"))
    assert sentences == RULE_TEXT, "run this file as a script to regenerate rule_text.py"
    assert set(RULE_TEXT) == set(RULES)


def test_a_changed_sentence_in_the_doc_is_caught() -> None:
    """Editing a rule's first sentence in the doc makes the doc's statement differ from
    RULE_TEXT; a rule's table row counts too."""
    doc = CONTRACT_DOC.read_text(encoding="utf-8")
    heading = "#### `S-PUT.4` Terminal tasks are final\n\n"
    edited = doc.replace(heading + "A `completed`", heading + "A `finished`")
    assert rule_sentences(edited)["S-PUT.4"] != RULE_TEXT["S-PUT.4"]
    assert rule_sentences(DOCTORED) == {"S-A": "first rule: ", "INV-B": "an invariant"}
    assert rule_sentences("#### `S-X` Title\n\n* One. Two.\n") == {"S-X": "Title: One."}


DOCTORED: Final = """\
# Contract

## `S-A` first rule

| id | meaning |
|---|---|
| `INV-B` | an invariant |

Prose mentions `S-C.2`, and a block:

```python
@pytest.mark.rule("S-D.1")
```
"""


def test_a_rule_missing_from_the_doc_is_reported() -> None:
    """A catalogue id the doc never names fails the check."""
    rules = {"S-A": "a", "INV-B": "b", "S-C.2": "c", "S-D.1": "d", "S-MISSING.3": "m"}
    assert check(DOCTORED, rules) == [
        "rule S-MISSING.3 is not in the doc",
        "rule S-C.2 has no heading or table row of its own",
        "rule S-D.1 has no heading or table row of its own",
    ]


def test_an_id_the_catalogue_lacks_is_reported() -> None:
    """An id in the doc's backticks (inline or in a code block) that RULES lacks fails."""
    assert check(DOCTORED, {"S-A": "a", "INV-B": "b"}) == [
        "the doc names unknown rule S-C.2",
        "the doc names unknown rule S-D.1",
    ]


def test_a_doctored_copy_of_the_real_doc_fails_both_ways() -> None:
    """Renaming one id throughout the real doc loses a rule and adds an unknown one."""
    doctored = CONTRACT_DOC.read_text(encoding="utf-8").replace("`S-RENEW`", "`S-RENEWAL`")
    assert check(doctored, RULES) == [
        "rule S-RENEW is not in the doc",
        "the doc names unknown rule S-RENEWAL",
    ]


def test_only_ids_inside_backticks_count() -> None:
    """Bare prose and look-alikes (S-…, lowercase, longer words) are not rule ids."""
    text = "S-PLAIN in prose; `S-…` and `s-lower` and `XS-WORD` and `S-CREATE.1-4`"
    assert rule_ids_in(text) == {"S-CREATE.1"}
    assert check("## `S-A`\n", {"S-A": "a"}) == []
    assert check("## S-A without backticks\n", {"S-A": "a"}) == ["rule S-A is not in the doc"]


MINIMAL_STORE: Final = repository_root() / "examples" / "minimal_store.py"


def test_the_guide_shows_the_minimal_store_as_it_is_in_the_repository() -> None:
    """ "Write your own store" begins with examples/minimal_store.py, verbatim (the file the
    third-party test runs the whole suite on)."""
    doc = CONTRACT_DOC.read_text(encoding="utf-8")
    guide = doc[doc.index("## Write your own store") : doc.index("## What a Store is")]
    blocks = [block.split("\n", 1)[1].removesuffix("```") for block in FENCED.findall(guide)]
    assert blocks[0] == MINIMAL_STORE.read_text(encoding="utf-8")


def test_the_doc_is_found_from_this_file_not_the_working_directory() -> None:
    """The root is the workspace folder above this test file, so the doc is found wherever
    pytest runs from."""
    root = repository_root()
    assert Path(__file__).resolve().is_relative_to(root)
    assert (root / "contract_tests" / "tests" / "meta" / Path(__file__).name).is_file()
    assert CONTRACT_DOC.is_file()


if __name__ == "__main__":
    RULE_TEXT_MODULE.write_text(
        rule_text_source(rule_sentences(CONTRACT_DOC.read_text(encoding="utf-8"))),
        encoding="utf-8",
    )

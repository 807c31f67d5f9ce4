"""docs/store-contract.md and the rule catalogue name the same rules (both directions)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mcp_tasks_contract import RULES

if TYPE_CHECKING:
    from collections.abc import Mapping

# Fenced blocks first (their backticks would pair up wrongly as inline spans), then spans.
FENCED: Final = re.compile(r"^```[^\n]*\n.*?^```", re.DOTALL | re.MULTILINE)
INLINE: Final = re.compile(r"`([^`\n]+)`")
RULE_ID: Final = re.compile(r"(?<![\w-])(S-[A-Z]+(?:\.\d+)?|INV-[A-Z]+)(?![\w])")


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


def test_the_doc_is_found_from_this_file_not_the_working_directory() -> None:
    """The root is the workspace folder above this test file, so the doc is found wherever
    pytest runs from."""
    root = repository_root()
    assert Path(__file__).resolve().is_relative_to(root)
    assert (root / "contract_tests" / "tests" / "meta" / Path(__file__).name).is_file()
    assert CONTRACT_DOC.is_file()

"""Every message a user can see has an entry on the troubleshooting page, so the page cannot rot.

The messages are read from the source of every distribution (packages/*/src, and the
commands the contract distribution adds, contract_tests/src/mcp_tasks_contract/cli), not
from a list kept by hand: the text of each error raised or built with a message, each CLI error
and its hint, each JSON-RPC error, each domain error's default message (its docstring),
each log line at WARNING or above, each line the CLI prints on stderr, and each
``warn``/``fail`` row of ``mcp-tasks doctor``.
A message is its literal text with every interpolated part as ``…``; the page must hold
its longest literal fragment, word for word. A message with no fragment of
``MIN_FRAGMENT`` characters says nothing a reader could search for, and is not required.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from markdown_blocks import REPO

if TYPE_CHECKING:
    from pathlib import Path

PAGE = REPO / "docs" / "troubleshooting.md"
SOURCES = sorted(
    [
        *REPO.glob("packages/*/src/**/*.py"),
        *REPO.glob("contract_tests/src/mcp_tasks_contract/cli/*.py"),
    ]
)

#: Shorter fragments are too generic to search for ("…: …").
MIN_FRAGMENT = 12
NOT_FOUND = "Failed to retrieve task: Task not found"
LOG_LEVELS = {"warning", "error", "exception", "critical"}
#: Calls whose first argument (or ``message=``/``hint=``) a user reads, besides ``raise``.
MESSAGE_BUILDERS = {
    "CLIError",
    "UsageError",
    "ServeError",
    "MCPError",
    "internal_error",
    "invalid_params",
    "header_mismatch",
}
#: Helpers that take a message as their n-th argument: a log line at ERROR, a task failed
#: with that message.
MESSAGE_ARGUMENT = {"log_failure": 1, "_fail_quietly": 1}
#: Not messages a user of the product sees: a bug's assertion, a module's missing
#: attribute (Python's own wording), the demo tool's scripted answer, a log line that only
#: joins two other messages.
NOT_USER_FACING = {
    ("AssertionError", None),
    ("AttributeError", None),
    ("ToolError", "demo_tools.py"),
    ("log", "logs.py"),
}


@dataclass(frozen=True)
class Message:
    """One user-visible message template, where it is built, and what builds it."""

    text: str
    where: str
    kind: str

    @property
    def fragment(self) -> str:
        parts = re.split(r"…|%[-.\d]*[sdrf]|\{\w*\}", self.text)
        return max((" ".join(part.split()) for part in parts), key=len).strip(" :;,.")


def _template(node: ast.expr | None) -> str | None:
    """A string expression's text with each interpolation as ``…``; ``None`` if not a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else ast.unparse(func)


def _is_message_constant(node: ast.Assign | ast.AnnAssign) -> bool:
    """``NOT_FOUND_MESSAGE = "…"``, ``DURABLE_HINT: Final = "…"``, ``SDK_MISSING = "…"``: a
    message kept as a name."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(
        isinstance(target, ast.Name) and target.id.endswith(("_MESSAGE", "_HINT", "_MISSING"))
        for target in targets
    )


def _to_stderr(call: ast.Call) -> bool:
    """``print(…, file=sys.stderr)``: a CLI's warning or last words."""
    return any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in call.keywords)


def _may_warn_or_fail(level: ast.expr) -> bool:
    """A doctor row's level that is, or may be (``"ok" if … else "fail"``), warn or fail."""
    if isinstance(level, ast.IfExp):
        return _may_warn_or_fail(level.body) or _may_warn_or_fail(level.orelse)
    return isinstance(level, ast.Constant) and level.value in ("warn", "fail")


def _excluded(kind: str, path: Path) -> bool:
    return (kind, None) in NOT_USER_FACING or (kind, path.name) in NOT_USER_FACING


def _messages_of(path: Path) -> list[Message]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = str(path.relative_to(REPO))
    found: list[tuple[str, str | None]] = []
    raised = {id(node.exc) for node in ast.walk(tree) if isinstance(node, ast.Raise)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node)
            first = node.args[0] if node.args else None
            keywords = {k.arg: k.value for k in node.keywords}
            if id(node) in raised or name in MESSAGE_BUILDERS:
                found.append((name, _template(first) or _template(keywords.get("message"))))
                found.append((name, _template(keywords.get("hint"))))
            elif name == "print" and _to_stderr(node):
                found.append(("stderr", _template(first)))
            elif name in MESSAGE_ARGUMENT and len(node.args) > MESSAGE_ARGUMENT[name]:
                found.append((name, _template(node.args[MESSAGE_ARGUMENT[name]])))
            elif isinstance(node.func, ast.Attribute) and name in LOG_LEVELS:
                found.append(("log", _template(first)))
        elif isinstance(node, ast.Dict):  # a JSON-RPC error object written out
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "message":
                    found.append(("error object", _template(value)))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _is_message_constant(node):
            found.append(("constant", _template(node.value)))
        elif isinstance(node, ast.Tuple) and len(node.elts) == 3:
            if _may_warn_or_fail(node.elts[1]):
                detail = node.elts[2]
                details = (
                    [detail.body, detail.orelse] if isinstance(detail, ast.IfExp) else [detail]
                )
                found += [("doctor", _template(each)) for each in details]
        elif isinstance(node, ast.ClassDef) and any(
            isinstance(base, ast.Name) and base.id == "MCPTasksError" for base in node.bases
        ):
            found.append(("error", ast.get_docstring(node)))
    return [
        Message(text, where, kind)
        for kind, text in found
        if text is not None and not _excluded(kind, path)
    ]


def user_messages() -> list[Message]:
    messages = [message for path in SOURCES for message in _messages_of(path)]
    return [message for message in messages if len(message.fragment) >= MIN_FRAGMENT]


def _page_text() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def test_the_source_has_messages_to_check() -> None:
    """The scan finds the messages it is meant to: a scan that broke would pass every page."""
    texts = {message.text for message in user_messages()}
    assert "Subscription limit reached" in texts  # a JSON-RPC error
    assert any(text.startswith("cannot reach the store") for text in texts)  # a CLI error
    assert any("tasks are kept in memory" in text for text in texts)  # a start-up warning
    assert any("run mcp-tasks migrate" in text for text in texts)  # a doctor row
    assert "Task not found." in texts  # a domain error's docstring
    assert NOT_FOUND in texts  # a message kept as a constant


@pytest.mark.parametrize("message", user_messages(), ids=lambda m: f"{m.where}:{m.fragment[:40]}")
def test_every_user_visible_message_is_on_the_troubleshooting_page(message: Message) -> None:
    """The message's longest literal fragment appears on docs/troubleshooting.md."""
    assert message.fragment in _page_text(), (
        f"{message.where} ({message.kind}) says {message.text!r}: give it an entry on "
        f"docs/troubleshooting.md (its cause and its fix) containing {message.fragment!r}"
    )

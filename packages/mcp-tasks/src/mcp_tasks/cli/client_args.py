"""What the client commands (`call`, `get`, `watch`, `cancel`) read from the command line,
checked before connecting: `key=value` arguments, `--answer` answers, and their exit codes.

An answer is sent as an `ElicitResult` in `tasks/update` `inputResponses` (or an MRTR retry),
so `--answer` takes only what that can carry, and refuses anything else with an example of
an answer that works. This module imports no SDK: a usage error answers at once.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from mcp_tasks.cli._errors import UsageError

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_INPUT_REQUIRED = 5
EXIT_CALL_ERROR = 6

#: How long `call` and `watch` keep trying when the server goes away while they follow a
#: task (a restart: the task lives on in a durable store), unless `--reconnect-for` says.
RECONNECT_FOR_S = 60.0

ELICIT_ACTIONS = ("accept", "decline", "cancel")
ANSWER_HELP = (
    "answer input request KEY: a JSON object of the form's fields (accepted), "
    'e.g. confirm=\'{"confirm": true}\', or an elicitation result with "action", '
    'e.g. confirm=\'{"action": "decline"}\''
)


def parse_pairs(pairs: list[str], what: str) -> dict[str, Any]:
    """`key=value` pairs → dict; a value is JSON when it parses as JSON, else the raw string."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must look like key=value, got {pair!r}")
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return parsed


def parse_answers(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """`--answer KEY=JSON` pairs → key → the `ElicitResult` to send (`{"action", "content"?}`).

    A JSON object with `"action"` is sent as is; any other JSON object is the form's
    content, accepted.

    Raises:
        UsageError: a pair is not `key=value`, or its value is not an answer the wire can
            carry (not JSON, not an object, a field value that is not a string, number,
            boolean, null or list of strings, an unknown action); the hint shows one that is.
    """
    answers: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--answer must look like key=value, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            problem = f"{raw!r} is not JSON (names and strings take double quotes)"
            raise UsageError(
                f"--answer {pair} cannot be sent: {problem}", hint=answer_examples(key, True)
            ) from None
        refused = _answer_problem(value)
        if refused is not None:
            example = value if _is_field_value(value) and value is not None else True
            raise UsageError(
                f"--answer {pair} cannot be sent: {refused}", hint=answer_examples(key, example)
            )
        answers[key] = value if "action" in value else {"action": "accept", "content": value}
    return answers


def answer_examples(key: str, value: Any) -> str:
    """The next-step line after a refused answer: one that accepts, one that declines."""
    accept = answer_word(key, {key: value})
    decline = answer_word(key, {"action": "decline"})
    return (
        f"an answer that can be sent: --answer {accept} (the form's fields) or --answer {decline}"
    )


def _is_field_value(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int | float):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _content_problem(content: Any) -> str | None:
    if not isinstance(content, dict):
        return f"the content is a JSON object of the form's fields, not {_shown(content)}"
    for field, value in content.items():
        if not _is_field_value(value):
            return (
                f"field {field!r} is {_shown(value)}; a form field is a string, number, "
                "boolean, null or list of strings"
            )
    return None


def _answer_problem(value: Any) -> str | None:
    """Why `value` is no `ElicitResult` (nor the content of an accepted one), or `None`."""
    if not isinstance(value, dict):
        return (
            "an answer is a JSON object: the form's fields, or an elicitation result with "
            f'"action"; not {_shown(value)}'
        )
    if "action" not in value:
        return _content_problem(value)
    if value["action"] not in ELICIT_ACTIONS:
        return f"the action is one of {', '.join(ELICIT_ACTIONS)}, not {_shown(value['action'])}"
    if value.get("content") is not None:
        return _content_problem(value["content"])
    return None


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return json.dumps(value)


def answer_word(key: str, example: Any) -> str:
    """`KEY=JSON`, quoted for a shell: the value of an `--answer`."""
    return shlex.quote(f"{key}={json.dumps(example)}")


def watch_line(url: str, task_id: str, key: str | None = None, example: Any = None) -> str:
    """The command that follows the task later (answering `key` with `example`, if given)."""
    line = shlex.join(["mcp-tasks", "watch", url, task_id])
    return line if key is None else f"{line} --answer {answer_word(key, example)}"

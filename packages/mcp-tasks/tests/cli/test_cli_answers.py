"""`--answer` values: exactly those the wire can carry as an `ElicitResult` are taken."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pydantic
import pytest

from mcp_tasks.cli._errors import UsageError
from mcp_tasks.cli.client_args import parse_answers

TAKEN = [
    ('{"confirm": true}', {"action": "accept", "content": {"confirm": True}}),
    ('{"name": "Ada", "n": 3, "x": 1.5, "tags": ["a"], "none": null}', None),
    ("{}", {"action": "accept", "content": {}}),
    ('{"action": "decline"}', {"action": "decline"}),
    ('{"action": "cancel"}', {"action": "cancel"}),
    ('{"action": "accept", "content": {"ok": true}}', None),
    ('{"action": "accept", "content": {"ok": true}, "_meta": {"k": 1}}', None),
    ('{"action": "accept", "note": "extra keys ride along"}', None),
]
REFUSED = [
    "true",
    '"yes"',
    "3",
    "null",
    '["a"]',
    "{ok:true}",
    "yes",
    '{"action": "ok"}',
    '{"action": "accept", "content": "yes"}',
    '{"action": "accept", "content": {"a": {"b": 1}}}',
    '{"a": {"b": 1}}',
    '{"a": [1, 2]}',
]


@pytest.mark.parametrize(("raw", "sent"), TAKEN)
def test_what_is_taken_is_an_elicit_result(raw: str, sent: dict[str, Any] | None) -> None:
    """A taken answer is sent as an ElicitResult the SDK's own model accepts."""
    [(key, answer)] = parse_answers([f"k={raw}"]).items()
    assert key == "k"
    if sent is not None:
        assert answer == sent
    types.ElicitResult.model_validate(answer)


@pytest.mark.parametrize("raw", REFUSED)
def test_what_is_refused_is_no_elicit_result(raw: str) -> None:
    """A refused answer is a usage error whose next step shows answers that can be sent;
    neither it nor it as the content of an accepted answer is a valid ElicitResult."""
    with pytest.raises(UsageError) as caught:
        parse_answers([f"k={raw}"])
    assert caught.value.message.startswith(f"--answer k={raw} cannot be sent: ")
    assert caught.value.hint is not None
    assert caught.value.hint.startswith('an answer that can be sent: --answer \'k={"k": ')
    try:
        value = json.loads(raw)
    except ValueError:
        return  # not JSON at all
    if value is None:
        return  # `null` would be an accept without content: refused as no object
    # An object with "action" is sent as is; anything else as an accepted answer's content.
    sent = (
        value
        if isinstance(value, dict) and "action" in value
        else {"action": "accept", "content": value}
    )
    with pytest.raises(pydantic.ValidationError):
        types.ElicitResult.model_validate(sent, strict=True)

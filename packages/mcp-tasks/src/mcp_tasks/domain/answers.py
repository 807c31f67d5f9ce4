"""Whether an answer fits the input request it answers: an elicitation result must carry
an ``action``, and an accepted form's ``content`` must match the request's
``requestedSchema`` (a restricted, flat JSON Schema), with no field the form does not name.

One check for every place an answer arrives (``tasks/update``, a synchronous call's
``inputResponses``, a preflight's answers) and for the CLI before it sends one, so a body
only ever sees answers that match what it asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

ELICIT_ACTIONS: Final = ("accept", "decline", "cancel")
#: At most this many of an answer's problems are named (the first is what to fix).
_SHOWN: Final = 3


def answer_mismatch(request: Mapping[str, Any], answer: object) -> str | None:
    """Why ``answer`` does not answer ``request`` as it asked, in words naming the field;
    ``None`` when it does. Only elicitations are checked (a sampling or roots result has
    no schema of the server's to fit)."""
    if request.get("method") != "elicitation/create":
        return None
    if not isinstance(answer, Mapping):
        return "an elicitation result is an object with an action"
    action = answer.get("action")
    if action not in ELICIT_ACTIONS:
        return f"the action must be accept, decline or cancel, not {_shown(action)}"
    content = answer.get("content")
    if action != "accept":
        return f"a {action} answer carries no content" if content else None
    params = request.get("params")
    params = params if isinstance(params, Mapping) else {}
    if params.get("mode", "form") != "form":
        return None  # a URL elicitation's accept is the user's consent: no content
    schema = params.get("requestedSchema")
    if not isinstance(schema, Mapping):
        return None  # a request that states no form: no field to hold the content to
    return form_mismatch(schema, content)


def form_mismatch(schema: Mapping[str, Any], content: object) -> str | None:
    """Why ``content`` does not fill the form ``schema`` asks (``None``: it does): a field
    of the wrong type or out of range, a required field missing, a field it does not name
    (when it names any)."""
    if not isinstance(content, Mapping):
        return f"an accepted answer's content is an object of fields, not {_shown(content)}"
    fields = schema.get("properties")
    asked = list(fields) if isinstance(fields, Mapping) else []
    # A key the form does not name is a mistyped field (JSON Schema would let it through);
    # a form that names no field (a bare confirmation) has none to mistype.
    problems = [
        f"unknown field {name!r} (the form asks for {', '.join(map(repr, asked))})"
        for name in content
        if asked and name not in asked
    ]
    # Only when a form is checked: every process that serves or calls imports this module.
    from jsonschema import Draft202012Validator  # noqa: PLC0415
    from jsonschema.exceptions import SchemaError, UnknownType  # noqa: PLC0415

    try:
        errors = sorted(
            Draft202012Validator(dict(schema)).iter_errors(dict(content)),
            key=lambda error: list(map(str, error.absolute_path)),
        )
    except (SchemaError, UnknownType):  # the server's schema is broken: nothing to fit
        return None
    for error in errors:
        if error.validator == "additionalProperties":
            continue  # named above, field by field
        path = list(error.absolute_path)
        where = f"field {path[0]!r}: " if path else ""
        problems.append(where + error.message)
    return "; ".join(problems[:_SHOWN]) or None


def _shown(value: object) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 40 else f"{text[:37]}..."

"""`--answer` and typed answers held to the question before they are sent: the same check
the server makes (:mod:`mcp_tasks.domain.answers`), so a wrong answer is one line naming
the field (exit 2) instead of a server's refusal, and a prompt asks again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_tasks.cli._errors import UsageError
from mcp_tasks.domain.answers import answer_mismatch, form_mismatch

if TYPE_CHECKING:
    from collections.abc import Mapping


def check_given_answer(key: str, request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
    """Refuse an `--answer` that does not fit the request it answers.

    Raises:
        UsageError: naming the key, the field and what is wrong; the hint lists the
            form's fields with their types.
    """
    why = answer_mismatch(request, answer)
    if why is not None:
        raise UsageError(
            f"--answer {key} does not fit the question: {why}", hint=_form_fields(request)
        )


def field_problem(field: str, spec: Mapping[str, Any], value: Any) -> str | None:
    """Why a value typed for one form field does not fit its schema (``None``: it does)."""
    return form_mismatch({"type": "object", "properties": {field: dict(spec)}}, {field: value})


def _form_fields(request: Mapping[str, Any]) -> str:
    params = request.get("params")
    schema = params.get("requestedSchema") if isinstance(params, dict) else None
    fields = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(fields, dict) or not fields:
        return "the form asks for no field: answer '{}' (accept) or '{\"action\": \"decline\"}'"
    required = schema.get("required") if isinstance(schema, dict) else None
    shown = []
    for name, spec in fields.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        needed = ", required" if isinstance(required, list) and name in required else ""
        shown.append(f"{name} ({kind}{needed})")
    return f"the form's fields: {', '.join(shown)}"

"""Per-tool task policy: whether a call may, must or must not become a task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from typing import Any, TypeAlias

from mcp_tasks.engine.request_view import RequestView


class TaskMode(StrEnum):
    """``forbidden``: always synchronous. ``optional``: a task when the client declared the
    extension, else synchronous. ``required``: a task, or -32021 when not declared."""

    FORBIDDEN = "forbidden"
    OPTIONAL = "optional"
    REQUIRED = "required"


ModeFunction: TypeAlias = Callable[
    [Mapping[str, Any], RequestView], "TaskMode | str | Awaitable[TaskMode | str]"
]
Policy: TypeAlias = "TaskMode | str | ModeFunction"


async def resolve_mode(
    policy: Policy, arguments: Mapping[str, Any], request: RequestView
) -> TaskMode:
    """The mode for this call: a fixed mode, or what the policy function says for these args."""
    if isinstance(policy, TaskMode):
        return policy
    if callable(policy):
        chosen = policy(arguments, request)
        if isinstance(chosen, Awaitable):
            chosen = await chosen
        return TaskMode(chosen)
    return TaskMode(policy)


def check_policy(policy: Policy) -> Policy:
    """Validate a fixed mode at registration time (a function is checked per call): the
    mode as a :class:`TaskMode`, or the function."""
    if not callable(policy):
        return TaskMode(policy)
    return policy

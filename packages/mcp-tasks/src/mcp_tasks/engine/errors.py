"""The JSON-RPC errors the engine answers with; no message ever names a task id.

:func:`to_jsonrpc_error` is the one place a domain error becomes a JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mcp.shared.exceptions import MCPError
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)

from mcp_tasks.domain.errors import (
    InputKeyReused,
    InputNotPossible,
    InvalidInputRequests,
    MCPTasksError,
    MissingClientCapability,
    NotJSONSafe,
    OwnerTaskLimitReached,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
)
from mcp_tasks.engine.wire import EXTENSION_ID

#: The revision that carries the tasks extension.
TASKS_PROTOCOL_VERSION: Final = "2026-07-28"

NOT_FOUND_MESSAGE: Final = "Failed to retrieve task: Task not found"


def missing_capability(capabilities: dict[str, object] | None = None) -> MCPError:
    """-32021: the request did not declare what the answer needs (default: the extension)."""
    required = capabilities if capabilities is not None else {"extensions": {EXTENSION_ID: {}}}
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        # What is missing in the message too: most clients show the message, not the data.
        message=f"Missing required client capability: {_named(required)}",
        data={"requiredCapabilities": required},
    )


def _named(capabilities: Mapping[str, object]) -> str:
    """Client capabilities as a reader names them: ``the io.modelcontextprotocol/tasks
    extension``, ``elicitation (form)``, ``sampling``."""
    names: list[str] = []
    for name, value in capabilities.items():
        inner = list(value) if isinstance(value, Mapping) else []
        if name == "extensions" and inner:
            names += [f"the {extension} extension" for extension in inner]
        else:
            names.append(f"{name} ({', '.join(map(str, inner))})" if inner else name)
    return ", ".join(names)


def header_mismatch(message: str) -> MCPError:
    """-32020: a routing header is missing or disagrees with the body."""
    return MCPError(code=HEADER_MISMATCH, message=f"Header mismatch: {message}")


def invalid_params(message: str) -> MCPError:
    """-32602 with a fixed message."""
    return MCPError(code=INVALID_PARAMS, message=message)


def invalid_answer(key: str, why: str) -> MCPError:
    """-32602: an answer does not fit its input request (its action, or its content against
    the request's ``requestedSchema``); ``why`` names the field."""
    return MCPError(code=INVALID_PARAMS, message=f"Invalid answer to input request {key!r}: {why}")


def task_not_found() -> MCPError:
    """-32602, the one answer for an unknown, foreign or expired task."""
    return MCPError(code=INVALID_PARAMS, message=NOT_FOUND_MESSAGE)


def task_limit_reached(*, for_caller: bool = False) -> MCPError:
    """-32603 when the store's row cap is reached, or ``for_caller``, the caller's own
    per-owner cap (it says nothing of other callers' tasks)."""
    message = "Task limit reached for this caller" if for_caller else "Task limit reached"
    return MCPError(code=INTERNAL_ERROR, message=message)


def subscription_limit_reached() -> MCPError:
    """-32603 when no more listen streams may open: the SDK's own answer past its limit."""
    return MCPError(code=INTERNAL_ERROR, message="Subscription limit reached")


def internal_error(message: str = "Internal error") -> MCPError:
    """-32603."""
    return MCPError(code=INTERNAL_ERROR, message=message)


def legacy_era_task_required(tool: str, protocol_version: str | None) -> MCPError:
    """-32603: a tool that needs a task, called on a revision that cannot carry one (asking
    for the tasks extension, -32021, could not help: that era has no such capability)."""
    era = protocol_version if protocol_version is not None else "(none)"
    return internal_error(
        f"Tool {tool[:200]!r} requires a task, which protocol revision {era[:40]} cannot "
        f"carry; use {TASKS_PROTOCOL_VERSION}"
    )


def method_not_found() -> MCPError:
    """-32601."""
    return MCPError(code=METHOD_NOT_FOUND, message="Method not found")


def to_jsonrpc_error(error: MCPTasksError) -> MCPError:
    """The JSON-RPC error a domain error answers as (the engine's gates may answer a more
    specific message where they know the context, e.g. which parameter was not JSON)."""
    match error:
        case MissingClientCapability(required=required):
            return missing_capability(required)
        case TaskNotFound():
            return task_not_found()
        case OwnerTaskLimitReached():
            return task_limit_reached(for_caller=True)
        case TaskLimitReached():
            return task_limit_reached()
        case StoreUnavailable():
            return internal_error("Task store unavailable")
        case NotJSONSafe() | InvalidInputRequests():
            return invalid_params(str(error))
        case InputKeyReused():
            return internal_error(str(error))
        case InputNotPossible():
            return internal_error("This call cannot ask the client for input")
        case _:
            return internal_error()

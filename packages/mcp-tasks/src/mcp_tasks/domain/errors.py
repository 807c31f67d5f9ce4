"""The one closed set of errors every Store and the engine raise.

Each class's docstring is its default message. Driver exceptions never leak: a
backend wraps them in :class:`StoreUnavailable` with the driver error as ``__cause__``.
No message ever contains a task id (ids are bearer capabilities). One error of the set,
:class:`~mcp_tasks.domain.models.RevisionConflict`, lives beside the record it carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


class MCPTasksError(Exception):
    """An mcp-tasks operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class TaskNotFound(MCPTasksError, LookupError):
    """Task not found."""


class DuplicateTaskId(MCPTasksError):
    """A task with this id already exists."""


class TaskLimitReached(MCPTasksError):
    """Task limit reached."""


class OwnerTaskLimitReached(TaskLimitReached):
    """Task limit reached for this caller."""


class StaleLease(MCPTasksError):
    """The lease is no longer valid: superseded, expired, or the task is final or gone."""


class EventIdReused(MCPTasksError):
    """This event id was already used for a different change."""


class DuplicateInputKeys(MCPTasksError):
    """Input request keys must be unique over a task's life."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = tuple(sorted(keys))
        super().__init__(f"Input request keys used before on this task: {', '.join(self.keys)}")


class InvalidInputRequests(MCPTasksError, ValueError):
    """Input requests must be a non-empty map of key to {method, params}."""


class InvalidArgument(MCPTasksError, ValueError):
    """An argument is outside the range the operation accepts (a caller's mistake)."""


class InvalidTransition(MCPTasksError):
    """This change is not legal from the task's current status."""


class NotJSONSafe(MCPTasksError, TypeError):
    """The value is not JSON-safe."""


class StoreUnavailable(MCPTasksError):
    """The task store is unavailable. Nothing is half-written; a write whose reply was lost
    may still have applied whole (docs/store-contract.md, `StoreUnavailable`)."""


class StoreNotMigrated(StoreUnavailable):
    """The store's namespace has no schema yet: nothing was ever stored there; `mcp-tasks
    migrate` (or a server's first use) creates it."""


class InputKeyReused(MCPTasksError):
    """An input key was asked again with a different request."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"Input key {key!r} was asked before with a different request; "
            "a new question needs a new key"
        )


class UnknownEncryptionKey(MCPTasksError):
    """A task is encrypted under a key that is not configured."""

    def __init__(self, key_id: str) -> None:
        #: The id of the missing key (never the key itself).
        self.key_id = key_id
        super().__init__(
            f"A task is encrypted under key id {key_id!r}, which is not configured: "
            "add that key to the encryption keys (MCP_TASKS_ENCRYPTION_KEYS)"
        )


class DecryptionFailed(MCPTasksError):
    """A task's encrypted data did not authenticate: changed in the store, moved from another
    task, or encrypted under another key with the same id."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        super().__init__(
            f"A task's data encrypted under key id {key_id!r} did not authenticate: changed in "
            "the store, moved from another task or owner, or encrypted under another key"
        )


class InputNotPossible(MCPTasksError):
    """This call cannot ask the client for input."""


class MissingClientCapability(MCPTasksError):
    """Missing required client capability."""

    def __init__(self, required: Mapping[str, object] | None = None) -> None:
        super().__init__()
        #: The client capabilities the request lacked; ``None``: the tasks extension itself
        #: (only a task can wait for input).
        self.required = dict(required) if required is not None else None

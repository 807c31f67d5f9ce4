"""The task status state machine: the single place that knows which transitions are legal."""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    """A task's status, spelled as on the wire."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL: frozenset[TaskStatus] = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
)

# The extension's state diagram. A status "moving" to itself is how progress and
# partial input answers are recorded; terminal states have no way out.
_LEGAL: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.WORKING: frozenset(
        {
            TaskStatus.WORKING,
            TaskStatus.INPUT_REQUIRED,
            TaskStatus.COMPLETED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
        }
    ),
    TaskStatus.INPUT_REQUIRED: frozenset(
        {
            TaskStatus.INPUT_REQUIRED,
            TaskStatus.WORKING,
            TaskStatus.COMPLETED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
        }
    ),
    TaskStatus.COMPLETED: frozenset(),
    TaskStatus.FAILED: frozenset(),
    TaskStatus.CANCELLED: frozenset(),
}


def can_move(source: TaskStatus, target: TaskStatus) -> bool:
    """Whether a task in ``source`` may move to ``target``."""
    return target in _LEGAL[source]

"""The task status state machine: one table, ``(status, event) → next status``.

Every write rule in :mod:`mcp_tasks.domain.rules` names the event it is and asks
:func:`next_status` whether, and where, the task moves; no rule decides legality by
itself. A pair the table lacks is not legal: what the write then does (ignore it, refuse
it) is stated once, in the rules module. Everything else about statuses — which are
terminal, which are live — is derived from the table.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping


class TaskStatus(StrEnum):
    """A task's status, spelled as on the wire."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """No event applies any more (see :data:`TERMINAL`)."""
        return self in TERMINAL


class Event(StrEnum):
    """Every Store write that consults the status machine, named by what it is."""

    PROGRESS = "progress"
    """``put_status(Progress)``."""
    REQUIRE_INPUT = "require_input"
    """``put_status(RequireInput)``."""
    COMPLETE = "complete"
    """``put_status(Complete)``."""
    FAIL = "fail"
    """``put_status(Fail)``, and a ``Retry`` with no retry delay left."""
    RETRY = "retry"
    """``put_status(Retry)`` with a retry delay left."""
    ANSWER_SOME = "answer_some"
    """``update`` answering some outstanding input keys while others remain."""
    ANSWER_ALL = "answer_all"
    """``update`` answering the last outstanding input key(s)."""
    CANCEL = "cancel"
    """``cancel``."""
    CLAIM = "claim"
    """``claim``: a worker takes the task (the status does not move)."""
    RENEW = "renew"
    """``renew``: a worker extends its lease (the status does not move)."""


_W: Final = TaskStatus.WORKING
_Q: Final = TaskStatus.INPUT_REQUIRED
_C: Final = TaskStatus.COMPLETED
_F: Final = TaskStatus.FAILED
_X: Final = TaskStatus.CANCELLED

#: The extension's state diagram as ``(status, event) → next status``; a missing pair is
#: not legal. A status "moving" to itself is how progress, partial answers, claims and
#: renewals are recorded. The terminal statuses have no entry at all.
TRANSITIONS: Final[Mapping[tuple[TaskStatus, Event], TaskStatus]] = MappingProxyType(
    {
        (_W, Event.PROGRESS): _W,
        (_W, Event.REQUIRE_INPUT): _Q,
        (_W, Event.COMPLETE): _C,
        (_W, Event.FAIL): _F,
        (_W, Event.RETRY): _W,
        (_W, Event.CANCEL): _X,
        (_W, Event.CLAIM): _W,
        (_W, Event.RENEW): _W,
        (_Q, Event.PROGRESS): _Q,
        (_Q, Event.COMPLETE): _C,
        (_Q, Event.FAIL): _F,
        (_Q, Event.RETRY): _W,
        (_Q, Event.ANSWER_SOME): _Q,
        (_Q, Event.ANSWER_ALL): _W,
        (_Q, Event.CANCEL): _X,
        (_Q, Event.CLAIM): _Q,
        (_Q, Event.RENEW): _Q,
    }
)


def next_status(status: TaskStatus, event: Event) -> TaskStatus | None:
    """The status ``event`` moves a task in ``status`` to, or ``None``: not legal."""
    return TRANSITIONS.get((status, event))


def statuses_allowing(event: Event) -> tuple[TaskStatus, ...]:
    """The statuses in which ``event`` is legal, in declaration order."""
    return tuple(status for status in TaskStatus if (status, event) in TRANSITIONS)


#: The statuses no event applies to: a task there never changes again.
TERMINAL: Final[frozenset[TaskStatus]] = frozenset(TaskStatus) - {
    status for status, _ in TRANSITIONS
}

#: The statuses some event still applies to, in declaration order (``working``,
#: ``input_required``): what the per-owner cap of active tasks counts.
LIVE: Final[tuple[TaskStatus, ...]] = tuple(s for s in TaskStatus if s not in TERMINAL)

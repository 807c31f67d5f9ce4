"""The task status state machine: which moves are legal."""

from __future__ import annotations

import itertools

from mcp_tasks.domain.states import TERMINAL, TaskStatus, can_move

W, Q, C, F, X = (
    TaskStatus.WORKING,
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
)

# The extension's state diagram, written out in full (Q: input_required).
LEGAL = {
    (W, W), (W, Q), (W, C), (W, F), (W, X),
    (Q, Q), (Q, W), (Q, C), (Q, F), (Q, X),
}  # fmt: skip


def test_can_move_matches_the_state_diagram_for_every_pair() -> None:
    """can_move is true exactly for the ten legal (source, target) pairs of the diagram."""
    for source, target in itertools.product(TaskStatus, repeat=2):
        assert can_move(source, target) is ((source, target) in LEGAL), (source, target)


def test_terminal_states_have_no_way_out() -> None:
    """completed, failed and cancelled are terminal and move nowhere, not even to themselves."""
    assert {C, F, X} == TERMINAL
    for status in TaskStatus:
        assert status.is_terminal is (status in TERMINAL)
    for source in TERMINAL:
        assert not any(can_move(source, target) for target in TaskStatus)


def test_statuses_are_spelled_as_on_the_wire() -> None:
    """The enum values are the wire strings of SEP-2663."""
    assert [s.value for s in TaskStatus] == [
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    ]

"""The task status state machine: the table itself, and what is derived from it."""

from __future__ import annotations

import itertools

import pytest

from mcp_tasks.domain.states import (
    LIVE,
    TERMINAL,
    TRANSITIONS,
    Event,
    TaskStatus,
    next_status,
    statuses_allowing,
)

W, Q, C, F, X = (
    TaskStatus.WORKING,
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
)
E = Event

# The extension's state diagram, written out in full (Q: input_required); every pair not
# listed has no entry.
EXPECTED = {
    (W, E.PROGRESS): W, (W, E.REQUIRE_INPUT): Q, (W, E.COMPLETE): C, (W, E.FAIL): F,
    (W, E.RETRY): W, (W, E.CANCEL): X, (W, E.CLAIM): W, (W, E.RENEW): W,
    (Q, E.PROGRESS): Q, (Q, E.COMPLETE): C, (Q, E.FAIL): F, (Q, E.RETRY): W,
    (Q, E.ANSWER_SOME): Q, (Q, E.ANSWER_ALL): W, (Q, E.CANCEL): X, (Q, E.CLAIM): Q,
    (Q, E.RENEW): Q,
}  # fmt: skip


def test_the_table_is_the_state_diagram_for_every_pair() -> None:
    """next_status answers exactly the diagram's 17 entries and None for every other pair."""
    assert dict(TRANSITIONS) == EXPECTED
    for status, event in itertools.product(TaskStatus, Event):
        assert next_status(status, event) == EXPECTED.get((status, event)), (status, event)


def test_the_table_cannot_be_changed_at_run_time() -> None:
    """TRANSITIONS is a read-only view: nothing can add a move behind the rules' back."""
    with pytest.raises(TypeError):
        TRANSITIONS[(C, E.PROGRESS)] = W  # type: ignore[index]
    assert next_status(C, E.PROGRESS) is None


def test_every_live_status_can_be_finished_cancelled_and_claimed() -> None:
    """From working and input_required, Complete, Fail and Cancel reach their terminal
    status, progress and claims keep the status, and a retry goes back to working."""
    for status in (W, Q):
        assert next_status(status, E.COMPLETE) is C
        assert next_status(status, E.FAIL) is F
        assert next_status(status, E.CANCEL) is X
        assert next_status(status, E.RETRY) is W
        for event in (E.PROGRESS, E.CLAIM, E.RENEW):
            assert next_status(status, event) is status


def test_input_is_requested_only_while_working_and_answered_only_while_required() -> None:
    """RequireInput leaves working only; answers apply only in input_required: some keep
    it there, the last one resumes working."""
    assert statuses_allowing(E.REQUIRE_INPUT) == (W,)
    assert next_status(W, E.REQUIRE_INPUT) is Q
    assert statuses_allowing(E.ANSWER_SOME) == (Q,)
    assert statuses_allowing(E.ANSWER_ALL) == (Q,)
    assert next_status(Q, E.ANSWER_SOME) is Q
    assert next_status(Q, E.ANSWER_ALL) is W


def test_terminal_states_have_no_way_out() -> None:
    """completed, failed and cancelled are terminal: derived as the statuses with no entry,
    they accept no event at all, not even one that would keep them where they are."""
    assert {C, F, X} == TERMINAL
    for status in TaskStatus:
        assert status.is_terminal is (status in TERMINAL)
    for status, event in itertools.product(TERMINAL, Event):
        assert next_status(status, event) is None, (status, event)


def test_every_status_is_reachable_from_working() -> None:
    """Following the table from a new task (working) reaches every status."""
    reached, frontier = {W}, [W]
    while frontier:
        status = frontier.pop()
        for event in Event:
            target = next_status(status, event)
            if target is not None and target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(TaskStatus)


def test_every_event_is_legal_somewhere() -> None:
    """No event is dead: each has at least one entry."""
    for event in Event:
        assert statuses_allowing(event), event


def test_live_statuses_are_the_non_terminal_ones_in_declaration_order() -> None:
    """LIVE (what the SQL layer's ACTIVE list is) is working, input_required — in this
    order, which the SQL text of the partial indexes depends on."""
    assert LIVE == (W, Q)
    assert statuses_allowing(E.CLAIM) == (W, Q)
    assert statuses_allowing(E.CANCEL) == (W, Q)


def test_statuses_are_spelled_as_on_the_wire() -> None:
    """The enum values are the wire strings of SEP-2663."""
    assert [s.value for s in TaskStatus] == [
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    ]

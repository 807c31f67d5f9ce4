"""Hypothesis strategies of task records around one ``now``: for the property tests that a
store's restated rules (the SQL predicates, the MongoDB pipelines) agree with
:mod:`mcp_tasks.domain.rules`.

Every instant a rule reads is ``None``, exactly on its edge, one millisecond either side, or
anywhere within :data:`SPREAD_MS` of it, so that records sit on the edges a restatement
must get right.
"""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st

from mcp_tasks.domain.models import Claim, TaskRecord, WorkSpec
from mcp_tasks.domain.states import TaskStatus

__all__ = [
    "CLAIM_HOLDER",
    "JOB",
    "LIVE",
    "SPREAD_MS",
    "TERMINAL",
    "TOKENS",
    "maybe",
    "near",
    "task_records",
]

#: How far from their edges the generated instants and durations stray (one hour).
SPREAD_MS: Final = 3_600_000
#: The work of a record that has some.
JOB: Final = WorkSpec("job")
LIVE: Final = (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)
TERMINAL: Final = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
#: The worker of every generated claim, and the tokens a claim holds.
CLAIM_HOLDER: Final = "w-old"
TOKENS: Final = ("t1", "t2")


def near(edge: int) -> st.SearchStrategy[int]:
    """An instant on ``edge``, one millisecond either side, or anywhere within the spread."""
    return st.one_of(
        st.just(edge),
        st.sampled_from((edge - 1, edge + 1)),
        st.integers(edge - SPREAD_MS, edge + SPREAD_MS),
    )


def maybe(strategy: st.SearchStrategy[int]) -> st.SearchStrategy[int | None]:
    """``None`` or a value of ``strategy``."""
    return st.none() | strategy


@st.composite
def task_records(draw: st.DrawFn, now: int, retention: int, *, as_stored: bool) -> TaskRecord:
    """A record whose every column a rule reads is ``None`` or sits on, beside or away from
    its edge: ``now`` (``now - retention`` for the last update, which only reaping reads).

    ``as_stored``: ``ttl_ms`` is ``expires_at - created_at`` (or both ``None``) and
    ``created_at`` is at most ``now`` and the last update, as a store writes them. Otherwise
    ``ttl_ms``, ``expires_at`` and ``created_at`` vary independently, so that a restatement
    is checked on every row, not only on the rows a store writes.

    Live statuses and work come twice as often as terminal statuses and no work: the claim
    rule has the most conditions, and a record must pass all but one of them for a wrong
    edge in that one to show. The ``task_id`` is empty: each batch numbers its records.
    """
    last_updated_at = draw(near(now - retention))
    latest = min(last_updated_at, now) if as_stored else last_updated_at
    created_at = latest - draw(st.integers(0, SPREAD_MS))
    expires_at = draw(maybe(near(now)))
    if as_stored:
        ttl_ms = None if expires_at is None else expires_at - created_at
    else:
        ttl_ms = draw(maybe(st.integers(1, SPREAD_MS)))
    claim_ends = draw(maybe(near(now)))
    generation = draw(st.integers(0, 3)) + (0 if claim_ends is None else 1)
    token = draw(st.sampled_from(TOKENS))
    return TaskRecord(
        task_id="",
        owner=draw(st.sampled_from((None, "alice", "bob"))),
        status=draw(st.sampled_from((*LIVE, *LIVE, *TERMINAL))),
        revision=draw(st.integers(0, 3)),
        created_at=created_at,
        last_updated_at=last_updated_at,
        ttl_ms=ttl_ms,
        expires_at=expires_at,
        work=draw(st.sampled_from((JOB, JOB, None))),
        retry_at=draw(maybe(near(now))),
        generation=generation,
        claim=None if claim_ends is None else Claim(CLAIM_HOLDER, token, claim_ends),
    )

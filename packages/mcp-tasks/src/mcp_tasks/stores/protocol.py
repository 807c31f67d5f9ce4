"""The Store contract: the only shared state of every server process.

A Store needs no base class: anything that satisfies :class:`Store` is one. The rules
below are normative and are proven, rule by rule (``S-…`` ids), by the shared contract
suite (the ``mcp-tasks-contract`` distribution). The pure functions of
:mod:`mcp_tasks.domain.rules` compute every write; a backend only persists atomically.

There is deliberately no way to list, scan or count tasks (S-NOLIST): task ids are
bearer capabilities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.models import (
        Claimed,
        Lease,
        NewTask,
        StatusChange,
        TaskRecord,
        Transition,
    )
    from mcp_tasks.domain.rules import OwnerArg

#: The operations every Store implements (the structural test checks this list).
STORE_OPERATIONS: tuple[str, ...] = (
    "create",
    "get",
    "update",
    "cancel",
    "put_status",
    "claim",
    "renew",
    "release",
    "reap",
    "close",
)


@runtime_checkable
class Store(Protocol):
    """Durable task state. Every method is atomic; on failure nothing is half-written.

    Errors are those of :mod:`mcp_tasks.domain.errors` only; backend failures MUST surface as
    :class:`~mcp_tasks.domain.errors.StoreUnavailable` with the driver error as ``__cause__``.
    Times are the store's clock, in epoch milliseconds.
    """

    async def create(self, task: NewTask) -> TaskRecord:
        """Insert a new task (S-CREATE) and return its record at revision 0.

        MUST check id uniqueness, the row cap and insert task plus work in one atomic step;
        the task MUST be visible to ``get`` on any connection once this returns.

        Raises:
            TaskLimitReached: ``max_rows`` unexpired rows (or the per-owner cap) reached.
            DuplicateTaskId: the id exists; the original is untouched.
        """
        ...

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        """Read a task (S-GET). A pure read: MUST NOT change the record.

        ``owner`` is the caller's principal; ``ANY_OWNER`` skips the check for trusted
        server-side callers.

        Raises:
            TaskNotFound: unknown, foreign or expired, indistinguishably.
        """
        ...

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        """Accept answers to outstanding input requests (S-UPDATE, ``tasks/update``).

        Keys not outstanding are ignored. Answered keys leave ``input_requests`` at once;
        the last one moves the task to ``working``. Atomic read-modify-write.

        Raises:
            TaskNotFound: unknown, foreign or expired.
        """
        ...

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        """Cancel (S-CANCEL, ``tasks/cancel``): non-terminal → ``cancelled`` at once,
        outstanding input cleared, any claim left for its worker to discover; terminal →
        ``unchanged``.

        Raises:
            TaskNotFound: unknown, foreign or expired.
        """
        ...

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        """A worker's write (S-PUT), checked as :func:`mcp_tasks.domain.rules.apply_put` says.

        Raises:
            TaskNotFound: unknown or expired.
            StaleLease: the lease does not match, or (without one) another worker holds
                a live claim.
            EventIdReused: the event id was used with a different body.
            RevisionConflict: ``expected_revision`` is stale.
            DuplicateInputKeys: an input key was requested before on this task.
            InvalidTransition: input requested while the task is not ``working``.
        """
        ...

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: frozenset[str] | None = None,
    ) -> Claimed | None:
        """Claim one eligible task (S-CLAIM): the given one, or the oldest eligible.

        ``work_types``: only a task whose work's type is one of these (S-CLAIM.4), in the
        same single step (``None``: any type). Under any concurrency at most one live claim
        per task exists. Returns ``None`` when nothing is eligible.
        """
        ...

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        """Extend a live lease to store now + ``lease_ms`` (S-RENEW); no revision change.

        Raises:
            StaleLease: expired, superseded, or the task is terminal or gone.
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Free the claim at once, keeping its generation (S-RELEASE); stale → no-op."""
        ...

    async def reap(self, *, limit: int = 500) -> int:
        """Delete up to ``limit`` whole expired tasks (S-REAP); return how many.

        Idempotent and safe beside concurrent reapers and writers.
        """
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...

"""Bounds on open task ``subscriptions/listen`` streams: per process and per principal."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from mcp_tasks.engine import errors

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Open task listen streams per process (per ``Tasks``), at most: the SDK's own listen
#: handler stops at the same number.
DEFAULT_MAX_LISTEN_STREAMS: Final = 1024
#: Open task listen streams per principal, at most; unauthenticated callers share one count.
DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER: Final = 16
#: Seconds between checks of a listen stream's token with the server's verifier: how long
#: a revoked token's stream may run on.
DEFAULT_TOKEN_RECHECK_S: Final = 30.0


class ListenSlots:
    """The task listen streams open in this process: at most ``total``, at most
    ``per_owner`` of one principal. A stream holds its slot from before its acknowledgment
    until it ends; past either bound a listen is refused before anything is sent."""

    def __init__(
        self,
        total: int = DEFAULT_MAX_LISTEN_STREAMS,
        per_owner: int = DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
    ) -> None:
        for name, value in (("max_listen_streams", total), ("per_owner", per_owner)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer")
        self.total = total
        self.per_owner = per_owner
        self._open: Counter[str | None] = Counter()

    def __repr__(self) -> str:
        return f"ListenSlots(open={self.open}, total={self.total}, per_owner={self.per_owner})"

    @property
    def open(self) -> int:
        """How many streams hold a slot."""
        return self._open.total()

    @contextmanager
    def taken(self, owner: str | None) -> Iterator[None]:
        """Hold one slot of ``owner``'s while the block runs.

        Raises:
            MCPError: -32603 "Subscription limit reached" (the SDK's own answer past its
                limit) when the process or the principal has no slot left.
        """
        if self.open >= self.total or self._open[owner] >= self.per_owner:
            raise errors.subscription_limit_reached()
        self._open[owner] += 1
        try:
            yield
        finally:
            self._open[owner] -= 1
            if not self._open[owner]:
                del self._open[owner]

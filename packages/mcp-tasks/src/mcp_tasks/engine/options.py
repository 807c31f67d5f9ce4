"""How the engine answers by default: TTL, poll interval, the ``Mcp-Name`` rule, listen bounds."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_tasks.domain.errors import InvalidArgument
from mcp_tasks.domain.models import DEFAULT_TTL_MS, is_positive_ms_or_none
from mcp_tasks.engine.listen_slots import (
    DEFAULT_MAX_LISTEN_STREAMS,
    DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
    DEFAULT_TOKEN_RECHECK_S,
)
from mcp_tasks.engine.wire import DEFAULT_POLL_INTERVAL_MS


@dataclass(frozen=True, kw_only=True)
class ServingOptions:
    """How requests are served: ``Tasks(serving=ServingOptions(default_ttl_ms=...))``.

    ``default_ttl_ms``: the TTL of a task whose tool and request name none (1 hour;
    ``None``: unlimited). ``default_poll_interval_ms``: the ``pollIntervalMs`` a task's
    answers suggest when its tool names none (2 s). ``require_name_header``: refuse
    ``tasks/*`` over HTTP without an ``Mcp-Name`` header (a mismatch is refused either
    way). ``max_listen_streams`` (1,024) and ``max_listen_streams_per_owner`` (16) bound
    the task ``subscriptions/listen`` streams open in this process and per principal;
    past either, a listen is answered -32603 "Subscription limit reached" before anything
    is sent. A stream opened with a token ends (its graceful result) when the token
    expires, and when the server's token verifier, asked again every
    ``listen_token_recheck_s`` (30), refuses it.

    Raises:
        InvalidArgument: a value out of range (checked when the options are built).
    """

    default_ttl_ms: int | None = DEFAULT_TTL_MS
    default_poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS
    require_name_header: bool = False
    max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS
    max_listen_streams_per_owner: int = DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER
    listen_token_recheck_s: float = DEFAULT_TOKEN_RECHECK_S

    def __post_init__(self) -> None:
        if not is_positive_ms_or_none(self.default_ttl_ms):
            raise InvalidArgument("default_ttl_ms must be a positive integer or None")
        poll = self.default_poll_interval_ms
        if isinstance(poll, bool) or not isinstance(poll, int) or poll < 1:
            raise InvalidArgument("default_poll_interval_ms must be a positive integer")
        if not self.listen_token_recheck_s > 0:
            raise InvalidArgument("listen_token_recheck_s must be a positive number of seconds")
        for name, value in (
            ("max_listen_streams", self.max_listen_streams),
            ("max_listen_streams_per_owner", self.max_listen_streams_per_owner),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive integer")

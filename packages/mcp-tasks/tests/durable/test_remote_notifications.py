"""A store on another host: the cross-process notification tests again, with the servers
in a network namespace of their own reaching Postgres and Redis over a delayed link
(remote_host.py), the tests reaching the servers over it too. Same invariants as on
loopback. Needs root: skipped without it, failed in CI."""

from __future__ import annotations

import pytest
from remote_host import processes, remote, store_url
from test_notifications import (
    signals_only,
    test_a_cancel_sent_to_b_stops_the_body_on_a,
    test_an_answer_sent_to_b_reaches_the_body_on_a_and_b_hears_the_end,
)

pytestmark = pytest.mark.anyio

__all__ = [
    "processes",
    "remote",
    "signals_only",
    "store_url",
    "test_a_cancel_sent_to_b_stops_the_body_on_a",
    "test_an_answer_sent_to_b_reaches_the_body_on_a_and_b_hears_the_end",
]

"""A store on another host: the crash test again, with the servers in a network
namespace of their own reaching Postgres and Redis over a delayed link (remote_host.py),
the tests reaching the servers over it too. Same invariants as on loopback. Needs root:
skipped without it, failed in CI."""

from __future__ import annotations

import pytest
from remote_host import processes, remote, store_url
from test_crash_recovery import test_sigkill_mid_task_another_process_completes_every_task_once

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

__all__ = [
    "processes",
    "remote",
    "store_url",
    "test_sigkill_mid_task_another_process_completes_every_task_once",
]

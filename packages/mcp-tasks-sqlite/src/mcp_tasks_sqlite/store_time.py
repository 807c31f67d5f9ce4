"""The store's clock of one SQLite file: one clock every process on the file agrees on.

SQLite has no server to keep the time, and a process's wall clock can be stepped (NTP, a
resumed VM, an operator): a process 90 s ahead would see every other process's leases as
run out and take their live tasks; one 90 s behind would wait 90 s longer than the lease to
take over a crashed server's. So the store does not read the wall clock at each decision.
The first process to open the file since the machine booted writes the offset between its
wall clock and the machine's boot-time clock (``CLOCK_BOOTTIME``: since boot, suspend
included, never stepped, one for every process on the host) into the file; every process
then reads the store's time as ``CLOCK_BOOTTIME + offset``. WAL already needs every process
on one host (its index is shared memory), so all of them read the same ``CLOCK_BOOTTIME``.
After a reboot (a new ``boot_id``) the first process to open the file writes the offset
again.

Where the kernel has no ``boot_id`` or ``CLOCK_BOOTTIME`` (not Linux) the store reads each
process's wall clock, as ``system_clock`` does.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Final

from mcp_tasks.domain.clock import system_clock

BOOT_ID: Final = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot of the machine (Linux), or ``None`` where the kernel does not say."""
    try:
        return BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _since_boot_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


class StoreTime:
    """The store's time of one file and table prefix, in epoch milliseconds.

    Not callable before :meth:`establish` ran on a connection to the file (the store's
    connections do that when they open, outside any transaction)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._boot = boot_id() if hasattr(time, "CLOCK_BOOTTIME") else None
        self._offset_ns: int | None = None
        self._lock = threading.Lock()  # the store's two connection threads open together

    @property
    def shared(self) -> bool:
        """Whether the store's time is the file's (else each process's wall clock)."""
        return self._boot is not None

    def __call__(self) -> int:
        if self._offset_ns is None:
            if self._boot is None:
                return system_clock()
            raise RuntimeError("the store's time is read before a connection established it")
        return (_since_boot_ns() + self._offset_ns) // 1_000_000

    def offset_ms(self) -> int | None:
        """The store's time minus this process's wall clock, once established."""
        if self._offset_ns is None:
            return None
        return self() - system_clock()

    def establish(self, conn: sqlite3.Connection) -> None:
        """Read the file's offset for this boot, writing it first if no process has since
        the machine booted (``conn`` is not in a transaction)."""
        if self._boot is None:
            return
        with self._lock:
            if self._offset_ns is not None:
                return
            found = self._read(conn)
            if found is None:
                conn.execute("BEGIN IMMEDIATE")  # the check and the write as one
                try:
                    conn.execute(
                        f'CREATE TABLE IF NOT EXISTS "{self.table}" '
                        "(id INTEGER PRIMARY KEY CHECK (id = 1), boot_id TEXT NOT NULL, "
                        "offset_ns INTEGER NOT NULL)"
                    )
                    found = self._read(conn)
                    if found is None:
                        # This process's wall clock, now, starts the store's time.
                        found = time.time_ns() - _since_boot_ns()
                        conn.execute(
                            f'INSERT OR REPLACE INTO "{self.table}" VALUES (1, ?, ?)',  # noqa: S608
                            (self._boot, found),
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            self._offset_ns = found

    def _read(self, conn: sqlite3.Connection) -> int | None:
        """The offset written since this boot, or ``None``."""
        try:
            rows = conn.execute(
                f'SELECT boot_id, offset_ns FROM "{self.table}" WHERE id = 1'  # noqa: S608
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        if not rows or rows[0][0] != self._boot:
            return None
        return int(rows[0][1])

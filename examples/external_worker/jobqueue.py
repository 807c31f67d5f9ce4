"""A tiny job queue on a shared folder: enough to hand task ids to a worker process.

Stands in for Celery, arq or a GPU queue. A job file holds a task id, which is a bearer
capability: keep the folder private (it is created 0700).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


class JobQueue:
    """`put` a JSON job; `take` the oldest one, at most once across any number of workers."""

    def __init__(self, folder: Path) -> None:
        self.pending = folder / "pending"
        self.taken = folder / "taken"
        for path in (folder, self.pending, self.taken):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)

    def put(self, job: dict[str, Any]) -> None:
        name = f"{os.times().elapsed:020.6f}-{secrets.token_hex(4)}.json"
        staging = self.pending / f".{name}.tmp"
        staging.write_text(json.dumps(job))
        staging.replace(self.pending / name)  # atomic: a worker never sees half a job

    def take(self) -> dict[str, Any] | None:
        for path in sorted(self.pending.glob("*.json")):
            claimed = self.taken / path.name
            try:
                path.rename(claimed)  # atomic: exactly one worker wins a job
            except FileNotFoundError:
                continue
            job: dict[str, Any] = json.loads(claimed.read_text())
            claimed.unlink()
            return job
        return None

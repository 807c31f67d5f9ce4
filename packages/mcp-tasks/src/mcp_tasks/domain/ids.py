"""Task ids and lease tokens: unguessable, header-safe, never logged."""

from __future__ import annotations

import secrets


def new_task_id() -> str:
    """A bearer capability: 256 random bits as 43 url-safe characters, never starting with
    ``-`` (a command line would read such an id as an option: ``mcp-tasks get URL -x…``)."""
    while True:
        task_id = secrets.token_urlsafe(32)
        if not task_id.startswith("-"):
            return task_id


def new_token() -> str:
    """A lease token: proof that a write comes from the current claim holder."""
    return secrets.token_urlsafe(16)


def redact(task_id: str) -> str:
    """What may appear in a DEBUG log line in place of an id: its first 6 characters."""
    return task_id[:6] + "…"

"""The CLI's error surface: every failure a user can cause is one line (plus at most one
line of next step) and a documented exit code; `--debug` adds the traceback.

Exit codes shared by every command (docs/cli.md): 0 success, 1 a check failed (or, for
`call`, the tool's own error), 2 a usage error (a malformed argument, option, store URL
or APP), 6 what the command needs could not be reached (a store, a server, the port to
listen on), 7 the store does not offer what the command needs (`stats` on a store without
`stats()`), 130 interrupted. `call`, `get`, `watch` and `cancel` add 3, 4 and 5.
"""

from __future__ import annotations

import errno
import re
import socket
from typing import TYPE_CHECKING

from mcp_tasks.stores.abilities import InFile, Located
from mcp_tasks.stores.observed import unobserved
from mcp_tasks.stores.opening import (
    InvalidStoreURL,
    StoreNotInstalled,
    UnknownStoreScheme,
    describe_store,
    mask_password,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.errors import StoreUnavailable
    from mcp_tasks.stores.protocol import Store

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 6
EXIT_NOT_OFFERED = 7
EXIT_INTERRUPTED = 130


class CLIError(Exception):
    """A failure to tell the user in one line, with an optional next step and its exit code."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


class UsageError(CLIError):
    """A malformed argument or option: exit 2."""


def leaves(error: BaseException) -> list[BaseException]:
    """The leaf exceptions of a (possibly nested) exception group, in order."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def find(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first leaf of `error` that is a `kind`, if any."""
    return next((leaf for leaf in leaves(error) if isinstance(leaf, kind)), None)


def explain(error: BaseException) -> CLIError | None:
    """The one-line form of an error a user can cause; `None` for a bug (a traceback)."""
    for leaf in leaves(error):
        if isinstance(leaf, CLIError):
            return leaf
        if isinstance(leaf, StoreNotInstalled):
            return UsageError(
                f"the {leaf.scheme}:// store is not installed (the URL itself is fine)",
                hint=f"install it: {leaf.from_index}; until that is on the package index, "
                f"{leaf.from_clone}",
            )
        if isinstance(leaf, UnknownStoreScheme | InvalidStoreURL):
            return UsageError(f"bad store URL: {leaf}")
    return None


def store_unreachable(store: Store, error: StoreUnavailable) -> CLIError:
    """The store could not be reached: its URL (password masked), the cause and what to try."""
    url = describe_store(store)
    cause = _cause_text(error, store)
    return CLIError(
        f"cannot reach the store {url}: {cause}",
        hint=_store_hint(store, cause),
        code=EXIT_UNREACHABLE,
    )


def store_not_migrated(store: Store) -> CLIError:
    """The store is reachable but its namespace was never migrated: nothing is there yet
    (the store's own words on what is missing: `mcp-tasks doctor`)."""
    url = describe_store(store)
    return CLIError(
        f"nothing is stored in {url} yet: its tables were never created",
        hint=f"run `mcp-tasks migrate --store {url}` (a server creates it too, on first use)",
        code=EXIT_UNREACHABLE,
    )


def _root_cause(error: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        nxt = error.__cause__ or error.__context__
        if nxt is None:
            break
        error = nxt
    return error


def _cause_text(error: StoreUnavailable, store: Store) -> str:
    root = _root_cause(error)
    if root is error:
        text = str(error)
    elif isinstance(root, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(root, socket.gaierror):
        text = "unknown host"
    elif isinstance(root, TimeoutError):
        text = "timed out"
    elif isinstance(root, OSError) and root.errno is not None and root.strerror:
        text = root.strerror.lower() if root.errno != errno.ENOENT else "no such file"
    else:
        text = str(root) or type(root).__name__
    store = unobserved(store)
    password = store.location.password if isinstance(store, Located) else None
    text = _readable(" ".join(text.split()))  # one line, whatever the driver wrote
    return text.replace(password, "***") if password else text


# What a driver's text says, in the words the hints answer (pymongo's server selection
# error, for one, nests the socket error in a few hundred characters of topology).
_REFUSED = re.compile(r"\[Errno 111\]|connection refused|connect call failed", re.IGNORECASE)
_UNKNOWN_HOST = re.compile(
    r"\[Errno -[23]\]|name or service not known|nodename nor servname", re.IGNORECASE
)
_TIMED_OUT = re.compile(r"timed out", re.IGNORECASE)
MAX_CAUSE_CHARS = 200


def _readable(text: str) -> str:
    """A driver's error text, shortened to what a person needs."""
    if _REFUSED.search(text):
        return "connection refused"
    if _UNKNOWN_HOST.search(text):
        return "unknown host"
    # pymongo: "HOST: ERROR (configured timeouts: …), Timeout: …, Topology Description: <…>"
    text = re.sub(r" \(configured timeouts: [^)]*\)", "", text.split(", Timeout: ", maxsplit=1)[0])
    if _TIMED_OUT.search(text) and len(text) > MAX_CAUSE_CHARS:
        return "timed out"
    if len(text) > MAX_CAUSE_CHARS:
        return text[: MAX_CAUSE_CHARS - 1] + "…"
    return text


def _store_hint(store: Store, cause: str) -> str:
    store = unobserved(store)
    if isinstance(store, InFile) and not store.path.parent.exists():
        folder = store.path.parent
        return f"the folder {folder} does not exist; create it or point the URL elsewhere"
    if cause in {"connection refused", "unknown host", "timed out"}:
        return "is the database server running, and are the host and port right?"
    return "check the URL and the store's server; `mcp-tasks doctor --store URL` probes it"


def one_line(text: str) -> str:
    """`text` on one line (drivers and servers may write several), passwords masked."""
    return " ".join(mask_password(word) if "://" in word else word for word in text.split())

"""The MongoDB store's test servers (:class:`~mcp_tasks.stores.provisioning.ProvisionsTestStores`).

In order: ``MCP_TASKS_TEST_MONGODB_URL`` (it must answer a ``ping``); else the embedded
SecantusDB server (the ``SecantusDB`` test dependency, GPL: run as a separate process,
never imported here) on a free port with its TTL monitor sweeping every second; else a
testcontainers ``mongo`` container where a Docker engine answers; else
:class:`~mcp_tasks.stores.provisioning.NoTestServer`. Each test uses a collection prefix of
its own. Stores are opened on :func:`mongodb_store_url` (the embedded server is slow; see
there); PyMongo itself gets the server's URL. :func:`own_mongodb` is a server a test may
kill and start again.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pymongo import MongoClient

from mcp_tasks.stores.opening import with_query
from mcp_tasks.stores.provisioning import container_server, first_test_server, server_url_env

if TYPE_CHECKING:
    from collections.abc import Iterator

MONGODB_URL_ENV = server_url_env("mongodb")


def _mongodb_answers(url: str) -> str | None:
    """Why the MongoDB server at ``url`` does not answer a ``ping``, or ``None`` when it does."""
    try:
        client: MongoClient[dict[str, Any]] = MongoClient(url, serverSelectionTimeoutMS=5000)
        try:
            client.admin.command("ping")
        finally:
            client.close()
    except Exception as exc:  # any failure means: no usable server
        return f"{type(exc).__name__}: {exc}"
    return None


# Run in a child process: the server of the SecantusDB package (GPL) stays a separate
# program. It prints its URI, then serves until its stdin closes. Its other settings come
# as JSON (the port, the replica set's name, sync_on_commit).
_SECANTUS_MAIN = """
import json, sys
from secantus import SecantusDBServer
with SecantusDBServer(
    host="127.0.0.1", storage_path=sys.argv[1], ttl_sweep_seconds=1, **json.loads(sys.argv[2])
) as s:
    print(s.uri, flush=True)
    sys.stdin.read()
"""


#: The store's bound (``?timeout_ms=``) on the embedded server for tests whose subject is not
#: the bound. SecantusDB is a Python server that serves one command at a time and sorts a
#: find in memory rather than walking an index: a claim that takes a real MongoDB about a
#: millisecond takes it tens idle and seconds on a loaded machine, where 16 claimers in one
#: process wait for each other's turns. The product's 5 s bound then fails such tests for the
#: server's speed alone; the tests of the bound itself set their own.
EMBEDDED_MONGODB_BOUND_MS = 30_000

#: The URLs of the embedded servers this process started.
_EMBEDDED_MONGODB: set[str] = set()


def mongodb_store_url(url: str) -> str:
    """``url`` with ``?timeout_ms=`` :data:`EMBEDDED_MONGODB_BOUND_MS` when it is an embedded
    server's, for a store opened by URL (``store_from_url`` takes the bound from it and hands
    PyMongo the rest); any other server's (``MCP_TASKS_TEST_MONGODB_URL``, a container) as it
    is, so the store keeps the product's bound there. Never for PyMongo itself: it warns of an
    option it does not know."""
    if url not in _EMBEDDED_MONGODB:
        return url
    return with_query(url, timeout_ms=str(EMBEDDED_MONGODB_BOUND_MS))


class SecantusProcess:
    """A SecantusDB server owned by the tests, in its own directory on a port of its own
    (the first start picks a free one and keeps it). :meth:`kill` stops it hard (SIGKILL);
    :meth:`start` starts it again on the same port and data; :meth:`stop` shuts it down.

    With ``sync_on_commit`` its journal is written and flushed before a write is
    acknowledged, so an acknowledged write survives a SIGKILL; without it (faster) the
    journal is written a moment later, and the last writes before a SIGKILL may be lost."""

    def __init__(
        self, directory: Path, *, standalone: bool = False, sync_on_commit: bool = False
    ) -> None:
        self.directory = directory
        self.settings: dict[str, Any] = {
            "replica_set_name": None if standalone else "secantus",
            "sync_on_commit": sync_on_commit,
        }
        self.port = 0
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        settings = json.dumps({**self.settings, "port": self.port})
        process = subprocess.Popen(  # noqa: S603 - our interpreter, our script
            [sys.executable, "-c", _SECANTUS_MAIN, str(self.directory), settings],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._process = process
        assert process.stdout is not None
        uri = process.stdout.readline().strip()
        if not uri.startswith("mongodb://"):
            self.kill()
            raise RuntimeError(f"the SecantusDB server did not start (exit {process.poll()})")
        self.url = uri
        self.port = int(urlsplit(uri).port or 0)
        _EMBEDDED_MONGODB.add(uri)

    def stop(self) -> None:
        """A clean shutdown (its stdin closes), then wait for the process."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            process.stdout.close()

    def kill(self) -> None:
        """Stop the server hard (SIGKILL: no shutdown); :meth:`start` brings it back."""
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


@contextmanager
def own_mongodb(
    *, standalone: bool = False, sync_on_commit: bool = False
) -> Iterator[SecantusProcess | None]:
    """A started :class:`SecantusProcess` a test may kill and start again, or ``None`` if
    the test-only SecantusDB package is not installed. A single-node replica set (change
    streams), or with ``standalone`` a standalone server (none, as a standalone ``mongod``)."""
    if importlib.util.find_spec("secantus") is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-mongo-") as directory:
        server = SecantusProcess(
            Path(directory), standalone=standalone, sync_on_commit=sync_on_commit
        )
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def embedded_mongodb(*, standalone: bool = False) -> Iterator[str | None]:
    """A fresh :func:`own_mongodb` server's URL, or ``None`` if SecantusDB is not installed."""
    with own_mongodb(standalone=standalone) as server:
        yield None if server is None else server.url


class MongoTestServers:
    """The MongoDB backend's test servers, in the order the module says."""

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server(
            "MongoDB",
            MONGODB_URL_ENV,
            _mongodb_answers,
            [
                embedded_mongodb,
                lambda: container_server(
                    "testcontainers.mongodb",
                    lambda module: module.MongoDbContainer("mongo:8"),
                    lambda container: str(container.get_connection_url()),
                ),
            ],
            f"set {MONGODB_URL_ENV}, install the SecantusDB test dependency, "
            "or run a Docker engine for testcontainers",
        )

    def test_store_url(self, server_url: str, /) -> str:
        return mongodb_store_url(server_url)

"""The suite counts the database's CPU with the server's (bench/common.py): it finds the
processes serving a server's connections on a real database server and reads their CPU.
Never a speed: CPU time is only asserted to have moved where the work was done."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from bench.common import Usage, database_pids, is_local

if TYPE_CHECKING:
    from collections.abc import Iterator

#: A stand-in for a server: one Postgres connection; prints its backend's pid, then runs a
#: query that keeps the backend busy for each line it reads.
CLIENT = """
import asyncio, sys
import asyncpg

async def main():
    conn = await asyncpg.connect(sys.argv[1])
    print(conn.get_server_pid(), flush=True)
    while sys.stdin.readline():
        await conn.fetchval("select count(*) from generate_series(1, 3000000)")
        print("done", flush=True)
    await conn.close()

asyncio.run(main())
"""


@pytest.fixture
def postgres_client(postgres_url: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    if not is_local(postgres_url):
        pytest.skip("the Postgres server runs on another machine: its processes are not here")
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, postgres_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    assert client.stdin is not None
    try:
        yield client, int(client.stdout.readline())
    finally:
        client.stdin.close()
        client.wait(30)
        client.stdout.close()


def test_the_postgres_backends_of_a_servers_connections_are_found(
    postgres_url: str, postgres_client: tuple[subprocess.Popen[str], int]
) -> None:
    """The backends are those of the server process's own connections (by client port),
    not every backend of the shared server."""
    client, backend = postgres_client
    assert database_pids("postgres", postgres_url, client.pid) == [backend]


def test_the_work_a_postgres_backend_does_for_the_server_is_counted(
    postgres_url: str, postgres_client: tuple[subprocess.Popen[str], int]
) -> None:
    """A query's CPU lands on the backend, not the client: the database's share counts it."""
    client, _ = postgres_client
    assert client.stdin is not None
    assert client.stdout is not None
    usage = Usage(client.pid, "postgres", postgres_url)
    usage.start()
    client.stdin.write("go\n")
    client.stdin.flush()
    assert client.stdout.readline().strip() == "done"
    usage.stop()
    assert usage.database_s is not None
    assert usage.database_s > usage.server_s
    assert usage.total_s == usage.server_s + usage.database_s


def test_the_redis_server_is_found_by_its_own_process_id(redis_url: str) -> None:
    """Redis names its process (``INFO server``); a store in the server's process has no
    database process."""
    if not is_local(redis_url):
        pytest.skip("the Redis server runs on another machine: its processes are not here")
    found = database_pids("redis", redis_url, 1)
    assert found is not None
    assert len(found) == 1
    with open(f"/proc/{found[0]}/comm") as comm:
        assert "redis" in comm.read()
    assert database_pids("memory", "memory://", 1) == []
    assert database_pids("postgres", "postgresql://db.example:5432/x", 1) is None

"""Our bench server (``bench.servers.ours``) as ``mcp-tasks serve`` serves an app:

    mcp-tasks serve bench.serve_app:mcp --store memory:// --port 8129
    mcp-tasks serve bench.serve_app:create_only --store URL --port 8130  # runs no task
    mcp-tasks worker bench.serve_app:mcp --store URL  # runs the tasks create_only made
    mcp-tasks serve bench.serve_app:listening --store URL --port 8131  # 2,000 listen streams

Its Tasks has no store of its own: serve gives it ``--store``'s. ``create_only`` creates its
tasks for workers (``RunnerOptions(run_tasks=False)``) and runs none; ``listening`` too,
and it takes up to 2,000 listen streams, all of one principal (the bench's client has no
token) where the product's defaults take 1,024 per process and 16 per principal.
"""

from __future__ import annotations

from bench.servers import ours_server
from mcp_tasks import RunnerOptions, ServingOptions, Tasks

mcp = ours_server(Tasks())
create_only = ours_server(Tasks(runner=RunnerOptions(run_tasks=False)))
listening = ours_server(
    Tasks(
        runner=RunnerOptions(run_tasks=False),
        serving=ServingOptions(max_listen_streams=2_000, max_listen_streams_per_owner=2_000),
    )
)

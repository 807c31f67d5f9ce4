"""Our bench server (``bench.servers.ours``) as ``mcp-tasks serve`` serves an app:

    mcp-tasks serve bench.serve_app:mcp --store memory:// --port 8129
    mcp-tasks serve bench.serve_app:create_only --store URL --port 8130  # runs no task
    mcp-tasks worker bench.serve_app:mcp --store URL  # runs the tasks create_only made

Its Tasks has no store of its own: serve gives it ``--store``'s. ``create_only`` creates its
tasks for workers (``RunnerOptions(run_tasks=False)``) and runs none.
"""

from __future__ import annotations

from bench.servers import ours_server
from mcp_tasks import RunnerOptions, Tasks

mcp = ours_server(Tasks())
create_only = ours_server(Tasks(runner=RunnerOptions(run_tasks=False)))

"""Our bench server (``bench.servers.ours``) as ``mcp-tasks serve`` serves an app:

    mcp-tasks serve bench.serve_app:mcp --store memory:// --port 8129

Its Tasks has no store of its own: serve gives it ``--store``'s.
"""

from __future__ import annotations

from bench.servers import ours_server
from mcp_tasks import Tasks

mcp = ours_server(Tasks())

"""The `mcp-tasks` commands this distribution adds (entry-point group ``mcp_tasks.commands``):
``contract``, the suite against a store URL or factory, and ``stress``, a concurrent
workload with exact invariants. They use the core's public CLI kit (:mod:`mcp_tasks.cli.kit`)."""

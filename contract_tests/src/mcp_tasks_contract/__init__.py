"""The shared Store contract suite of mcp-tasks."""

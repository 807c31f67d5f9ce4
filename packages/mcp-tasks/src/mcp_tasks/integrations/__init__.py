"""Adapters for third-party MCP frameworks; each imports its framework only when used."""

"""The domain: task values, statuses and their state machine, the Store rules, errors.

Pure Python with no I/O and no MCP SDK: every layer above builds on it, it imports none of
them (``nox -s lint`` checks the layers with import-linter).
"""

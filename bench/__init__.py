"""The performance suite: `nox -s bench` (``python -m bench.run``), every goal a ratio of two
figures measured side by side in one run. Each module runs as ``python -m bench.NAME`` from
the repository root."""

"""The performance suite of issue 13: `nox -s bench` (``python -m bench.run``)."""

"""The performance suite's own logic (verdicts, rounds, profiles), tested; never its speed."""

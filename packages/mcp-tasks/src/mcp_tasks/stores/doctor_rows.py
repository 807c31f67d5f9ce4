"""What a store's optional ``diagnose()`` returns to ``mcp-tasks doctor``, and the checks
several backends share (the clock skew against this machine)."""

from __future__ import annotations

#: One row: (check name, level, detail); level is one of :data:`LEVELS`.
DiagnosisRow = tuple[str, str, str]

#: "ok" and "warn" leave doctor's exit code at 0; "fail" makes it 1.
LEVELS = ("ok", "warn", "fail")

#: Above this a server's clock is reported as skewed.
MAX_CLOCK_SKEW_MS = 1_000


def clock_skew_row(server_ms: float, sent_s: float, received_s: float) -> DiagnosisRow:
    """The ``clock`` row: a server's time (epoch ms, read between ``sent_s`` and
    ``received_s`` of this machine's ``time.time()``) against the midpoint of that round
    trip. A store that keeps time by its server's clock stays correct when skewed; the
    task times a client reads are then off from the client's own clock by that much."""
    skew = round(server_ms - (sent_s + received_s) * 500)
    direction = "ahead of" if skew >= 0 else "behind"
    detail = f"the server's clock is {abs(skew)} ms {direction} this machine's"
    if abs(skew) > MAX_CLOCK_SKEW_MS:
        return ("clock", "warn", f"{detail} (over {MAX_CLOCK_SKEW_MS} ms: check NTP on both)")
    return ("clock", "ok", detail)

"""``crash_app`` with OpenTelemetry set up by the app itself: every span, as it ends, appended
to the file ``TRACED_SPANS`` names (one JSON object a line), so a process killed with SIGKILL
has written every span it ended."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan


class SpanFile(SpanExporter):
    """Appends each span to a file at once."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as file:
            for span in spans:
                file.write(span.to_json(indent=None) + "\n")
        return SpanExportResult.SUCCESS


_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(SpanFile(os.environ["TRACED_SPANS"])))
trace.set_tracer_provider(_provider)

from crash_app import mcp  # noqa: E402  (after the provider: the app is traced from the start)

__all__ = ["mcp"]

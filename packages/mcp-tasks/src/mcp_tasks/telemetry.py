"""What mcp-tasks tells OpenTelemetry: its spans, its metrics, and the trace context a task keeps.

Everything goes through the OpenTelemetry API only. Until an application installs a tracer
provider (``mcp-tasks[otel]``; ``mcp-tasks serve`` does it from the ``OTEL_*`` variables) no
span is even started (:func:`tracing`), and every measurement is the API's no-op, so a hook
costs well under a microsecond (docs/monitoring.md has the figures).

No span, event, attribute or metric carries a task id, an owner, arguments, input answers
or results (task ids are bearer capabilities, docs/architecture.md decision 1): attributes
are the tool's name, a status, an attempt number, the store's backend and an outcome, and an
error is recorded by its type's name only (a driver's message may quote a row).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import TracebackType

    from opentelemetry.context import Context
    from opentelemetry.util.types import AttributeValue

    from mcp_tasks.domain.models import TaskRecord

__all__ = [
    "ATTEMPT",
    "OUTCOME",
    "STATUS",
    "STORE",
    "TOOL",
    "Instruments",
    "SpanScope",
    "Untraced",
    "carrier",
    "context_of",
    "count_end",
    "fresh_trace",
    "instruments",
    "links_to",
    "tool_attributes",
    "tracing",
    "tracing_suppressed",
]

#: The instrumentation scope of every span and instrument.
SCOPE: Final = "mcp_tasks"

# Attribute keys. The tool's name is the key the MCP SDK's own spans use.
TOOL: Final = "gen_ai.tool.name"
STATUS: Final = "mcp_tasks.task.status"
ATTEMPT: Final = "mcp_tasks.task.attempt"
STORE: Final = "mcp_tasks.store"
OUTCOME: Final = "mcp_tasks.outcome"
METHOD: Final = "mcp.method.name"
DB_SYSTEM: Final = "db.system.name"
DB_OPERATION: Final = "db.operation.name"
ERROR_TYPE: Final = "error.type"

_tracer = trace.get_tracer(SCOPE)
# Only traceparent and tracestate: baggage could carry whatever a caller put there.
_w3c = TraceContextTextMapPropagator()


# The API's public look (``get_tracer_provider()``) reads ``os.environ`` on every call while
# no provider is installed, a microsecond or more, three times a ``tasks/get``. The global
# it reads is set once, by ``set_tracer_provider``, and read directly costs a tenth of that
# (a private name: docs/architecture.md, "The tracer provider's global"); an API release
# without it gets the public look. A provider OTEL_PYTHON_TRACER_PROVIDER names is made
# and set by the API's first look, which ``_tracer`` above made at import.
_NO_GLOBAL: Final = object()


def tracing() -> bool:
    """Whether a tracer provider is installed. Until one is, every span the API starts is
    its no-op, so :class:`SpanScope` starts none: the API's own no-op costs microseconds
    (a span, a context to make it current), and these run on every ``tasks/get``."""
    provider = getattr(trace, "_TRACER_PROVIDER", _NO_GLOBAL)  # see _NO_GLOBAL
    if provider is _NO_GLOBAL:
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return provider is not None


class SpanScope:
    """A span that is current while the ``with`` block runs, and ended after it.

    A plain class rather than the API's generator-based context manager (a third of its
    cost), and none of it while no tracer provider is installed (:func:`tracing`; ``span``
    is then the API's invalid span, recording nothing): this runs on every ``tasks/get``
    and every store operation. An exception leaving the block sets ``error.type`` to its
    type's name and, unless ``expected`` lists it, the span's status to ERROR (never the
    message: it may quote a task id)."""

    __slots__ = ("_expected", "_live", "_token", "span")

    def __init__(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        parent: Context | None = None,
        links: Sequence[Link] | None = None,
        expected: tuple[type[BaseException], ...] = (),
        live: bool | None = None,
    ) -> None:
        self._live = tracing() if live is None else live
        self.span: trace.Span = (
            _tracer.start_span(name, context=parent, kind=kind, attributes=attributes, links=links)
            if self._live
            else trace.INVALID_SPAN
        )
        self._expected = expected
        self._token: object = None

    def __enter__(self) -> trace.Span:
        if self._live:
            self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self._live:
            return
        otel_context.detach(self._token)  # type: ignore[arg-type]
        span = self.span
        if kind is not None and span.is_recording():
            span.set_attribute(ERROR_TYPE, kind.__qualname__)
            if not issubclass(kind, self._expected):
                span.set_status(StatusCode.ERROR)
        span.end()


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``); empty
    when no span is recording (always, without an SDK)."""
    headers: dict[str, str] = {}
    if tracing():
        _w3c.inject(headers)
    return headers


def context_of(headers: Mapping[str, str] | None) -> Context | None:
    """The trace context ``headers`` (from :func:`carrier`) hold, or ``None`` (none, or
    malformed)."""
    if not headers:
        return None
    try:
        found = _w3c.extract(headers)
    except (TypeError, ValueError):
        return None
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def links_to(headers: Mapping[str, str] | None) -> list[Link]:
    """A link to the span ``headers`` name (none when they name none)."""
    found = context_of(headers)
    if found is None:
        return []
    return [Link(trace.get_current_span(found).get_span_context())]


#: Set in the context of a block whose store operations start no span.
_UNTRACED: Final = otel_context.create_key("mcp_tasks.untraced")


class Untraced:
    """Inside the block the store operations of mcp-tasks start no span; they are still
    measured.
    For background polls (the recovery loop's claims, the reaper): an idle process would
    otherwise start a trace every second."""

    __slots__ = ("_token",)

    def __init__(self) -> None:
        self._token: object = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(otel_context.set_value(_UNTRACED, True))

    def __exit__(self, *exc_info: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]


def tracing_suppressed() -> bool:
    """Whether spans are suppressed here (:class:`Untraced`)."""
    return bool(otel_context.get_value(_UNTRACED))


def fresh_trace() -> Context:
    """A context with no span in it: a span started in it begins a trace of its own."""
    return otel_context.Context()


STORE_DURATION: Final = "db.client.operation.duration"
#: Histogram buckets, in seconds: a store operation's (the database semantic conventions'
#: advice, finer below 10 ms) and a task's (a run, a wait: milliseconds to hours).
_STORE_BOUNDS_S: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
_TASK_BOUNDS_S: Final = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class Instruments:
    """The counters and histograms of mcp-tasks (one set per process, :data:`instruments`).

    Counters carry the tool's name (``gen_ai.tool.name``) where there is one; durations are
    in seconds."""

    def __init__(self, meter: metrics.Meter) -> None:
        count = meter.create_counter

        def seconds(name: str, *, unit: str, description: str) -> metrics.Histogram:
            bounds = _STORE_BOUNDS_S if name == STORE_DURATION else _TASK_BOUNDS_S
            return meter.create_histogram(
                name, unit=unit, description=description, explicit_bucket_boundaries_advisory=bounds
            )

        self.created = count(
            "mcp_tasks.tasks.created", unit="{task}", description="Tasks created, by tool"
        )
        self.completed = count(
            "mcp_tasks.tasks.completed", unit="{task}", description="Tasks completed, by tool"
        )
        self.failed = count(
            "mcp_tasks.tasks.failed", unit="{task}", description="Tasks failed, by tool"
        )
        self.cancelled = count(
            "mcp_tasks.tasks.cancelled", unit="{task}", description="Tasks cancelled, by tool"
        )
        self.input_rounds = count(
            "mcp_tasks.input.rounds",
            unit="{round}",
            description="Times a running task asked its client for input, by tool",
        )
        self.retries = count(
            "mcp_tasks.tasks.retries",
            unit="{retry}",
            description="Retries a task body asked for and got, by tool",
        )
        self.recoveries = count(
            "mcp_tasks.tasks.recovered",
            unit="{task}",
            description="Runs that took a task over after its lease ran out or was released "
            "(a due retry is not one), by tool",
        )
        self.reaped = count(
            "mcp_tasks.tasks.reaped", unit="{task}", description="Expired tasks deleted"
        )
        self.refused = count(
            "mcp_tasks.tasks.refused",
            unit="{task}",
            description="Task creations refused by the store's row cap, by tool",
        )
        self.store_errors = count(
            "mcp_tasks.store.errors",
            unit="{error}",
            description="Store operations that failed (the store unavailable), by operation",
        )
        self.run_duration = seconds(
            "mcp_tasks.run.duration",
            unit="s",
            description="How long one run of a task body took, by tool and outcome",
        )
        self.first_run_delay = seconds(
            "mcp_tasks.run.first_delay",
            unit="s",
            description="Time from a task's creation to the start of its first run, by tool",
        )
        self.input_wait = seconds(
            "mcp_tasks.input.wait",
            unit="s",
            description="Time a task waited for its client's answers, by tool",
        )
        self.store_duration = seconds(
            STORE_DURATION,
            unit="s",
            description="Duration of store operations, by backend and operation",
        )


#: The instruments every part of mcp-tasks records to.
instruments: Final = Instruments(metrics.get_meter(SCOPE))


def tool_attributes(record: TaskRecord) -> dict[str, AttributeValue]:
    """The attributes that name ``record``'s tool (none for a manual task)."""
    return {} if record.work is None else {TOOL: record.work.type}


def count_end(record: TaskRecord) -> None:
    """Count a task that has just ended (completed, failed or cancelled), by tool."""
    counter = _ENDS.get(record.status)
    if counter is not None:
        counter.add(1, tool_attributes(record))


_ENDS: Final[dict[TaskStatus, metrics.Counter]] = {
    TaskStatus.COMPLETED: instruments.completed,
    TaskStatus.FAILED: instruments.failed,
    TaskStatus.CANCELLED: instruments.cancelled,
}

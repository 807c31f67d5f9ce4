"""OpenTelemetry's SDK for `serve` and `worker`, set up from the standard ``OTEL_*`` variables.

The setting up is OpenTelemetry's own (the SDK's configurator, the one
``opentelemetry-instrument`` runs): ``OTEL_TRACES_EXPORTER``, ``OTEL_METRICS_EXPORTER`` and
``OTEL_LOGS_EXPORTER`` choose the exporters (``otlp``, ``console``, and ``prometheus`` for a
scrape endpoint on ``OTEL_EXPORTER_PROMETHEUS_HOST``:``OTEL_EXPORTER_PROMETHEUS_PORT``,
default localhost:9464), ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_ENDPOINT`` and the rest as the SDK documents them. Nothing is set up
when none of the three names an exporter, when ``OTEL_SDK_DISABLED`` is true, or when a
tracer provider is installed already (by the app, or by ``opentelemetry-instrument``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Final

from opentelemetry import trace

from mcp_tasks.cli._errors import UsageError

#: The variables that choose an exporter per signal; setting one of them turns the SDK on.
EXPORTER_VARIABLES: Final = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER")

#: What the ``otel`` extra brings for ``otlp``: the exporter over HTTP (not gRPC).
DEFAULT_OTLP_PROTOCOL: Final = "http/protobuf"

SDK_MISSING: Final = (
    "mcp-tasks: {variable} is set, but the OpenTelemetry SDK is not installed: nothing is "
    'exported (pip install "mcp-tasks[otel]")'
)


def asked_exporters() -> list[str]:
    """The ``OTEL_*_EXPORTER`` variables that name an exporter (``none`` names none)."""
    return [
        name
        for name in EXPORTER_VARIABLES
        if os.environ.get(name, "").strip().lower() not in ("", "none")
    ]


def configure_from_environment() -> bool:
    """Set the SDK up as the ``OTEL_*`` variables say; whether it was set up here.

    Without the SDK (``mcp-tasks[otel]`` not installed) one line on stderr says that
    nothing is exported, and the command goes on.

    Raises:
        UsageError: the variables name an exporter that is not installed, or are malformed.
    """
    asked = asked_exporters()
    if not asked or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the app or opentelemetry-instrument set OpenTelemetry up: theirs
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        print(SDK_MISSING.format(variable=asked[0]), file=sys.stderr)
        return False
    # The SDK's own configurator, the one opentelemetry-instrument runs, exported from no
    # public module (docs/architecture.md, "The SDK's configurator"): if a release moves
    # it, this import fails loudly.
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator  # noqa: PLC0415

    os.environ.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", DEFAULT_OTLP_PROTOCOL)
    try:
        _OTelSDKConfigurator().configure()  # type: ignore[no-untyped-call]
    except (RuntimeError, ValueError) as error:
        raise UsageError(
            f"OpenTelemetry could not be set up from the OTEL_* variables: {error}",
            hint='the exporters of mcp-tasks[otel] are "otlp", "console" and "prometheus"',
        ) from None
    return True

"""`serve` and `worker` set OpenTelemetry's SDK up from the OTEL_* variables only when one of
them names an exporter; an exporter that is not installed is one usage line (exit 2).

(Setting up for real installs process-wide providers, once per process: that path runs in
real processes, tests/durable/test_trace_across_processes.py.)"""

from __future__ import annotations

import pytest
from opentelemetry import metrics, trace

from mcp_tasks.cli._errors import UsageError
from mcp_tasks.cli.otel import EXPORTER_VARIABLES, asked_exporters, configure_from_environment


@pytest.fixture(autouse=True)
def _no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*EXPORTER_VARIABLES, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)


def nothing_installed() -> bool:
    """No tracer or meter provider was set in this process."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and (
        type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
    )


def test_without_an_exporter_named_nothing_is_set_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_*_EXPORTER, or only `none`: the SDK is left alone (the API stays a no-op)."""
    assert configure_from_environment() is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", " None ")
    assert asked_exporters() == []
    assert configure_from_environment() is False
    assert nothing_installed()


def test_sdk_disabled_wins_over_an_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_SDK_DISABLED=true: nothing is set up, whatever the exporters say."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert asked_exporters() == ["OTEL_TRACES_EXPORTER"]
    assert configure_from_environment() is False
    assert nothing_installed()


def test_an_exporter_that_is_not_installed_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown exporter name is refused before any provider is installed: one line
    naming the problem, and the exporters the extra brings."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "no_such_exporter")
    with pytest.raises(UsageError) as raised:
        configure_from_environment()
    assert "no_such_exporter" in raised.value.message
    assert "\n" not in raised.value.message
    assert raised.value.hint is not None
    assert "prometheus" in raised.value.hint
    assert nothing_installed()

"""``telemetry.tracing()``, the check every span hook makes first: false until a tracer
provider is installed, true from then on, and true for a provider the environment names
(``OTEL_PYTHON_TRACER_PROVIDER``, made by the API on its first look). Each case in a process
of its own: a provider is set once per process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SET_LATER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from mcp_tasks.telemetry import tracing
before = tracing()
trace.set_tracer_provider(TracerProvider())
print(before, tracing())
"""

NAMED_BY_ENVIRONMENT = """
from mcp_tasks.telemetry import tracing
print(tracing())
"""


def run(code: str, **variables: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_tracing_is_false_until_a_provider_is_installed_and_true_after() -> None:
    """No provider: false; once the app installs one: true."""
    assert run(SET_LATER) == "False True"


@pytest.mark.parametrize("name", ["sdk_tracer_provider"])
def test_a_provider_named_by_the_environment_counts(name: str) -> None:
    """OTEL_PYTHON_TRACER_PROVIDER names a provider the API makes on its first look: the
    check looks the public way then, and sees it."""
    assert run(NAMED_BY_ENVIRONMENT, OTEL_PYTHON_TRACER_PROVIDER=name) == "True"

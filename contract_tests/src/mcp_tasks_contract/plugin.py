"""The pytest plugin (entry point ``pytest11``): registers the ``rule`` marker.

Loaded by pytest itself, so a store author needs no pytest configuration, even with
``--strict-markers``. It also asks pytest to rewrite the suite's asserts, which must
happen before the suite is imported (hence the package's lazy ``__init__``).
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("mcp_tasks_contract.suite", "mcp_tasks_contract.population")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rule(*ids): the Store contract rule ids (mcp_tasks_contract.rules.RULES) a test proves",
    )

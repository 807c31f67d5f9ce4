"""``fastmcp_extension()`` without fastmcp installed: one line with the install command."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_fastmcp_extension_without_fastmcp_names_the_install_command() -> None:
    # A fresh interpreter in which `import fastmcp` fails as it does when it is not installed.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["fastmcp"] = None  # import fastmcp -> ModuleNotFoundError
        from mcp_tasks import Tasks
        try:
            Tasks().fastmcp_extension()
        except ModuleNotFoundError as error:
            print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == (
        'Tasks.fastmcp_extension() needs fastmcp: pip install "mcp-tasks[fastmcp]"\n'
    )

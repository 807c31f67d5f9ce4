"""What a command of another distribution may use of the CLI: the error a command raises
for a mistake of its user (one line, a documented exit code) and the store a command names.

A distribution adds a command through the entry-point group ``mcp_tasks.commands``
(:data:`mcp_tasks.cli.COMMANDS_GROUP`): the entry point's name is the command's, its value
the module that defines ``add_parsers(commands)`` and a handler returning the exit code, as
the core's own command modules do (``mcp-tasks-contract`` adds ``contract`` and ``stress``
so). Everything else under ``mcp_tasks.cli`` is private to the core's commands.
"""

from __future__ import annotations

from mcp_tasks.cli._errors import (
    EXIT_CHECK_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_OFFERED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CLIError,
    UsageError,
)
from mcp_tasks.cli._stores import DEFAULT_STORE_URL, resolve_store_url, using_store

__all__ = [
    "DEFAULT_STORE_URL",
    "EXIT_CHECK_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_OFFERED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CLIError",
    "UsageError",
    "resolve_store_url",
    "using_store",
]

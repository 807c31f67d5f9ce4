"""The SEP-2663 protocol engine: gates, policies, wire shapes and errors; no transport code."""

from mcp_tasks.engine.core import (
    REMOVED_METHODS,
    TASK_METHODS,
    ArgumentsCheck,
    ArgumentsCheckFinder,
    Preflight,
    TaskEngine,
    ToolCall,
    ToolOptions,
    TtlOption,
    result_to_change,
    run_tool_call,
    tool_executor,
)
from mcp_tasks.engine.errors import to_jsonrpc_error
from mcp_tasks.engine.policy import Policy, TaskMode
from mcp_tasks.engine.request_view import RequestView
from mcp_tasks.engine.wire import EXTENSION_ID

__all__ = [
    "EXTENSION_ID",
    "REMOVED_METHODS",
    "TASK_METHODS",
    "ArgumentsCheck",
    "ArgumentsCheckFinder",
    "Policy",
    "Preflight",
    "RequestView",
    "TaskEngine",
    "TaskMode",
    "ToolCall",
    "ToolOptions",
    "TtlOption",
    "result_to_change",
    "run_tool_call",
    "to_jsonrpc_error",
    "tool_executor",
]

"""mcp-tasks: durable MCP Tasks (SEP-2663) on a pluggable Store."""

from mcp_tasks.clock import Clock, ManualClock, system_clock
from mcp_tasks.context import TaskCancelled, TaskContext, current_task_context
from mcp_tasks.control import Deferred, TaskControl, defer
from mcp_tasks.engine import RequestView, TaskEngine, TaskMode, ToolOptions
from mcp_tasks.errors import (
    DuplicateInputKeys,
    DuplicateTaskId,
    EventIdReused,
    InvalidInputRequests,
    InvalidTransition,
    MCPTasksError,
    NotJSONSafe,
    RevisionConflict,
    StaleLease,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
)
from mcp_tasks.ids import new_task_id
from mcp_tasks.models import (
    Claimed,
    Complete,
    Fail,
    Lease,
    NewTask,
    Outcome,
    Progress,
    RequireInput,
    Retry,
    StatusChange,
    StoreOptions,
    TaskRecord,
    Transition,
    WorkSpec,
)
from mcp_tasks.notifier import LocalNotifier, Notifier
from mcp_tasks.rules import ANY_OWNER
from mcp_tasks.runner import Runner
from mcp_tasks.sdk import TasksExtension
from mcp_tasks.states import TaskStatus
from mcp_tasks.store import STORE_OPERATIONS, Store
from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore
from mcp_tasks.stores.urls import UnknownStoreScheme, store_from_url
from mcp_tasks.tasks import Tasks

__all__ = [
    "ANY_OWNER",
    "STORE_OPERATIONS",
    "Claimed",
    "Clock",
    "Complete",
    # engine, runner and adapters
    "Deferred",
    "DuplicateInputKeys",
    "DuplicateTaskId",
    "EventIdReused",
    "Fail",
    "InvalidInputRequests",
    "InvalidTransition",
    "Lease",
    "LocalNotifier",
    "MCPTasksError",
    "ManualClock",
    "MemoryBackend",
    "MemoryTaskStore",
    "NewTask",
    "NotJSONSafe",
    "Notifier",
    "Outcome",
    "Progress",
    "RequestView",
    "RequireInput",
    "Retry",
    "RevisionConflict",
    "Runner",
    "StaleLease",
    "StatusChange",
    "Store",
    "StoreOptions",
    "StoreUnavailable",
    "TaskCancelled",
    "TaskContext",
    "TaskControl",
    "TaskEngine",
    "TaskLimitReached",
    "TaskMode",
    "TaskNotFound",
    "TaskRecord",
    "TaskStatus",
    "Tasks",
    "TasksExtension",
    "ToolOptions",
    "Transition",
    "UnknownStoreScheme",
    "WorkSpec",
    "current_task_context",
    "defer",
    "new_task_id",
    "store_from_url",
    "system_clock",
]

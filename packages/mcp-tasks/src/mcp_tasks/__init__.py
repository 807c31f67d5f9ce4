"""mcp-tasks: durable MCP Tasks (SEP-2663) on a pluggable Store."""

from mcp_tasks.adapters.sdk import TasksExtension
from mcp_tasks.domain.clock import Clock, ManualClock, system_clock
from mcp_tasks.domain.errors import (
    DuplicateInputKeys,
    DuplicateTaskId,
    EventIdReused,
    InputKeyReused,
    InputNotPossible,
    InvalidArgument,
    InvalidInputRequests,
    InvalidTransition,
    MCPTasksError,
    MissingClientCapability,
    NotJSONSafe,
    StaleLease,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
)
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.models import (
    Claimed,
    Complete,
    Fail,
    Lease,
    NewTask,
    Outcome,
    Progress,
    RequireInput,
    Retry,
    RevisionConflict,
    StatusChange,
    StoreOptions,
    TaskRecord,
    Transition,
    WorkSpec,
)
from mcp_tasks.domain.retries import exponential_backoff, fixed_backoff
from mcp_tasks.domain.rules import ANY_OWNER, lease_of
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.engine import RequestView, TaskEngine, TaskMode, ToolOptions
from mcp_tasks.runtime.context import (
    RetryRequested,
    TaskCancelled,
    TaskContext,
    current_task_context,
)
from mcp_tasks.runtime.control import Deferred, TaskControl, defer
from mcp_tasks.runtime.notifier import LocalNotifier, Notifier
from mcp_tasks.runtime.runner import Runner
from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore
from mcp_tasks.stores.opening import (
    NamespacesNotSupported,
    StoreBackend,
    UnknownStoreScheme,
    drop_namespace,
    namespaced_url,
    store_from_url,
)
from mcp_tasks.stores.protocol import STORE_OPERATIONS, Store
from mcp_tasks.tasks import StorePinned, Tasks

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
    "InputKeyReused",
    "InputNotPossible",
    "InvalidArgument",
    "InvalidInputRequests",
    "InvalidTransition",
    "Lease",
    "LocalNotifier",
    "MCPTasksError",
    "ManualClock",
    "MemoryBackend",
    "MemoryTaskStore",
    "MissingClientCapability",
    "NamespacesNotSupported",
    "NewTask",
    "NotJSONSafe",
    "Notifier",
    "Outcome",
    "Progress",
    "RequestView",
    "RequireInput",
    "Retry",
    "RetryRequested",
    "RevisionConflict",
    "Runner",
    "StaleLease",
    "StatusChange",
    "Store",
    "StoreBackend",
    "StoreOptions",
    "StorePinned",
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
    "drop_namespace",
    "exponential_backoff",
    "fixed_backoff",
    "lease_of",
    "namespaced_url",
    "new_task_id",
    "store_from_url",
    "system_clock",
]

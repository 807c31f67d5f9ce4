"""mcp-tasks: durable MCP Tasks (SEP-2663) on a pluggable Store.

Every name below is imported on first use, so a program that needs one corner of the
package (the command line's `--help`, the client) does not load the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        OwnerTaskLimitReached,
        StaleLease,
        StoreNotMigrated,
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
    from mcp_tasks.engine.options import ServingOptions
    from mcp_tasks.runtime.context import (
        RetryRequested,
        TaskCancelled,
        TaskContext,
        current_task_context,
    )
    from mcp_tasks.runtime.control import Deferred, TaskControl, defer
    from mcp_tasks.runtime.gauges import TelemetryOptions
    from mcp_tasks.runtime.notifier import (
        LISTENING_FALLBACK_S,
        POLL_FALLBACK_S,
        LocalNotifier,
        Notifier,
        NullNotifier,
        OffersNotifier,
        Relay,
        RelayNotifier,
        Subscription,
        notifier_for,
    )
    from mcp_tasks.runtime.runner import Runner, RunnerOptions
    from mcp_tasks.stores.location import StoreLocation
    from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore
    from mcp_tasks.stores.opening import (
        NamespacesNotSupported,
        StoreBackend,
        StoreNotInstalled,
        UnknownStoreScheme,
        drop_namespace,
        namespaced_url,
        store_from_url,
    )
    from mcp_tasks.stores.protocol import STORE_OPERATIONS, Store
    from mcp_tasks.stores.stats import StoreCounts, StoreStats
    from mcp_tasks.tasks import StorePinned, Tasks

__all__ = [
    "ANY_OWNER",
    "LISTENING_FALLBACK_S",
    "POLL_FALLBACK_S",
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
    "NullNotifier",
    "OffersNotifier",
    "Outcome",
    "OwnerTaskLimitReached",
    "Progress",
    "Relay",
    "RelayNotifier",
    "RequestView",
    "RequireInput",
    "Retry",
    "RetryRequested",
    "RevisionConflict",
    "Runner",
    "RunnerOptions",
    "ServingOptions",
    "StaleLease",
    "StatusChange",
    "Store",
    "StoreBackend",
    "StoreCounts",
    "StoreLocation",
    "StoreNotInstalled",
    "StoreNotMigrated",
    "StoreOptions",
    "StorePinned",
    "StoreStats",
    "StoreUnavailable",
    "Subscription",
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
    "TelemetryOptions",
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
    "notifier_for",
    "store_from_url",
    "system_clock",
]


# name → the module that defines it.
_EXPORTS: dict[str, str] = {
    "ANY_OWNER": "mcp_tasks.domain.rules",
    "Claimed": "mcp_tasks.domain.models",
    "Clock": "mcp_tasks.domain.clock",
    "Complete": "mcp_tasks.domain.models",
    "Deferred": "mcp_tasks.runtime.control",
    "DuplicateInputKeys": "mcp_tasks.domain.errors",
    "DuplicateTaskId": "mcp_tasks.domain.errors",
    "EventIdReused": "mcp_tasks.domain.errors",
    "Fail": "mcp_tasks.domain.models",
    "InputKeyReused": "mcp_tasks.domain.errors",
    "InputNotPossible": "mcp_tasks.domain.errors",
    "InvalidArgument": "mcp_tasks.domain.errors",
    "InvalidInputRequests": "mcp_tasks.domain.errors",
    "InvalidTransition": "mcp_tasks.domain.errors",
    "Lease": "mcp_tasks.domain.models",
    "LocalNotifier": "mcp_tasks.runtime.notifier",
    "MCPTasksError": "mcp_tasks.domain.errors",
    "ManualClock": "mcp_tasks.domain.clock",
    "MemoryBackend": "mcp_tasks.stores.memory",
    "MemoryTaskStore": "mcp_tasks.stores.memory",
    "MissingClientCapability": "mcp_tasks.domain.errors",
    "NamespacesNotSupported": "mcp_tasks.stores.opening",
    "NewTask": "mcp_tasks.domain.models",
    "NotJSONSafe": "mcp_tasks.domain.errors",
    "Notifier": "mcp_tasks.runtime.notifier",
    "NullNotifier": "mcp_tasks.runtime.notifier",
    "Outcome": "mcp_tasks.domain.models",
    "OwnerTaskLimitReached": "mcp_tasks.domain.errors",
    "LISTENING_FALLBACK_S": "mcp_tasks.runtime.notifier",
    "POLL_FALLBACK_S": "mcp_tasks.runtime.notifier",
    "Progress": "mcp_tasks.domain.models",
    "Relay": "mcp_tasks.runtime.notifier",
    "OffersNotifier": "mcp_tasks.runtime.notifier",
    "RelayNotifier": "mcp_tasks.runtime.notifier",
    "RequestView": "mcp_tasks.engine",
    "RequireInput": "mcp_tasks.domain.models",
    "Retry": "mcp_tasks.domain.models",
    "RetryRequested": "mcp_tasks.runtime.context",
    "RevisionConflict": "mcp_tasks.domain.models",
    "Runner": "mcp_tasks.runtime.runner",
    "RunnerOptions": "mcp_tasks.runtime.runner",
    "ServingOptions": "mcp_tasks.engine.options",
    "STORE_OPERATIONS": "mcp_tasks.stores.protocol",
    "StaleLease": "mcp_tasks.domain.errors",
    "StatusChange": "mcp_tasks.domain.models",
    "Store": "mcp_tasks.stores.protocol",
    "StoreBackend": "mcp_tasks.stores.opening",
    "StoreLocation": "mcp_tasks.stores.location",
    "StoreNotInstalled": "mcp_tasks.stores.opening",
    "StoreOptions": "mcp_tasks.domain.models",
    "StorePinned": "mcp_tasks.tasks",
    "StoreCounts": "mcp_tasks.stores.stats",
    "StoreStats": "mcp_tasks.stores.stats",
    "StoreNotMigrated": "mcp_tasks.domain.errors",
    "StoreUnavailable": "mcp_tasks.domain.errors",
    "Subscription": "mcp_tasks.runtime.notifier",
    "TaskCancelled": "mcp_tasks.runtime.context",
    "TaskContext": "mcp_tasks.runtime.context",
    "TaskControl": "mcp_tasks.runtime.control",
    "TaskEngine": "mcp_tasks.engine",
    "TaskLimitReached": "mcp_tasks.domain.errors",
    "TaskMode": "mcp_tasks.engine",
    "TaskNotFound": "mcp_tasks.domain.errors",
    "TaskRecord": "mcp_tasks.domain.models",
    "TaskStatus": "mcp_tasks.domain.states",
    "Tasks": "mcp_tasks.tasks",
    "TelemetryOptions": "mcp_tasks.runtime.gauges",
    "TasksExtension": "mcp_tasks.adapters.sdk",
    "ToolOptions": "mcp_tasks.engine",
    "Transition": "mcp_tasks.domain.models",
    "UnknownStoreScheme": "mcp_tasks.stores.opening",
    "WorkSpec": "mcp_tasks.domain.models",
    "current_task_context": "mcp_tasks.runtime.context",
    "defer": "mcp_tasks.runtime.control",
    "drop_namespace": "mcp_tasks.stores.opening",
    "exponential_backoff": "mcp_tasks.domain.retries",
    "fixed_backoff": "mcp_tasks.domain.retries",
    "lease_of": "mcp_tasks.domain.rules",
    "namespaced_url": "mcp_tasks.stores.opening",
    "new_task_id": "mcp_tasks.domain.ids",
    "notifier_for": "mcp_tasks.runtime.notifier",
    "store_from_url": "mcp_tasks.stores.opening",
    "system_clock": "mcp_tasks.domain.clock",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

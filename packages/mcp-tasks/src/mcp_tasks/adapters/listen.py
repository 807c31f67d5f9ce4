"""``notifications/tasks`` on the SDK's ``subscriptions/listen`` streams, through its
public middleware seam (``Server.middleware`` / ``MCPServer.middleware``).

The SDK's ``ListenHandler`` serves the core filters (tools, prompts, resources) and owns
the stream, but its acknowledgment drops ``taskIds`` and its event bus carries a closed set
of event kinds. So a listen request that names ``taskIds`` is taken by this middleware,
which checks it (-32021 / -32602, before anything is sent: HTTP 400), still lets the SDK's
handler serve the request's other filters, adds the honoured ``taskIds`` to the SDK's
acknowledgment as it is sent, and only then sends task notifications on the same stream,
stamped with the subscription id. A request without ``taskIds`` passes through untouched.
See docs/architecture.md, "Status notifications: the SDK seam".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    Notification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenResult,
)

from mcp_tasks.engine.listen import TASKS_NOTIFICATION, requested_task_ids, watch_tasks

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.session import ServerSession

    from mcp_tasks.engine import TaskEngine
    from mcp_tasks.engine.listen import TaskWatch
    from mcp_tasks.engine.request import RequestView

    ViewOf = Callable[[ServerRequestContext[Any, Any]], RequestView]

logger = logging.getLogger(__name__)

LISTEN_METHOD = "subscriptions/listen"
#: The core filters the SDK's own handler serves.
CORE_FILTERS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


class TasksNotification(Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """``notifications/tasks``: a ``DetailedTask`` and the subscription id in ``_meta``."""

    method: Literal["notifications/tasks"] = TASKS_NOTIFICATION
    params: dict[str, Any]


class _AckWithTasks:
    """The request's session as the SDK's listen handler sees it: its acknowledgment gets
    the honoured ``taskIds`` added, and it says when the acknowledgment is out."""

    def __init__(self, session: ServerSession, task_ids: list[str]) -> None:
        self._session = session
        self._task_ids = task_ids
        self.acknowledged = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        if isinstance(notification, SubscriptionsAcknowledgedNotification):
            honoured = notification.params.notifications.model_dump(
                by_alias=True, mode="json", exclude_none=True
            )
            honoured["taskIds"] = list(self._task_ids)
            notification = SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=SubscriptionFilter.model_validate(honoured),
                    _meta=notification.params.meta,
                )
            )
            await self._session.send_notification(notification, related_request_id)
            self.acknowledged.set()
            return
        await self._session.send_notification(notification, related_request_id)


class TaskListenMiddleware:
    """Serves ``taskIds`` on ``subscriptions/listen`` for one engine (a ``ServerMiddleware``)."""

    def __init__(self, engine: TaskEngine, request_view: ViewOf) -> None:
        self.engine = engine
        self._request_view = request_view

    def __repr__(self) -> str:
        return "TaskListenMiddleware()"

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != LISTEN_METHOD or ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        notifications = params.get("notifications")
        if not isinstance(notifications, Mapping):
            return await call_next(ctx)
        view = self._request_view(ctx)
        if not view.is_modern:
            return await call_next(ctx)
        task_ids = requested_task_ids(view, notifications)
        if task_ids is None:
            return await call_next(ctx)
        async with watch_tasks(self.engine, view, task_ids) as watch:
            return await self._serve(ctx, call_next, notifications, watch)

    async def _serve(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        notifications: Mapping[str, Any],
        watch: TaskWatch,
    ) -> HandlerResult:
        subscription_id = ctx.request_id
        meta = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        session = _AckWithTasks(ctx.session, watch.task_ids)
        others = {k: v for k, v in notifications.items() if k != "taskIds"}
        # Only tasks asked for: the stream ends with them. Core filters too: it stays open
        # for those, as the SDK serves them, after the tasks end.
        tasks_only = not any(others.get(k) for k in CORE_FILTERS) and not others.get(
            "resourceSubscriptions"
        )
        sdk_ctx = dataclasses.replace(
            ctx,
            session=cast("ServerSession", session),
            params={**(ctx.params or {}), "notifications": others},
        )
        outcome: list[HandlerResult] = []
        failure: list[Exception] = []

        async with anyio.create_task_group() as tg:

            async def sdk_stream() -> None:
                try:
                    outcome.append(await call_next(sdk_ctx))
                except Exception as exc:  # refused before the ack (e.g. its stream limit)
                    failure.append(exc)
                tg.cancel_scope.cancel()  # the SDK ended the stream (e.g. at shutdown)

            tg.start_soon(sdk_stream)
            await session.acknowledged.wait()
            async for body in watch.notifications():
                body["_meta"] = dict(meta)
                await ctx.session.send_notification(
                    cast("Any", TasksNotification(params=body)), related_request_id=subscription_id
                )
            if tasks_only:
                tg.cancel_scope.cancel()
        if failure:
            raise failure[0]
        if outcome:
            return outcome[0]
        return SubscriptionsListenResult(_meta=meta)


def serve_task_notifications(engine: TaskEngine, server: object, request_view: ViewOf) -> bool:
    """Add the middleware to ``server`` (an SDK ``Server`` or ``MCPServer``) once; ``False``
    when ``server`` has no middleware chain."""
    chain = getattr(server, "middleware", None)
    if not isinstance(chain, list):
        return False
    if not any(isinstance(m, TaskListenMiddleware) and m.engine is engine for m in chain):
        chain.append(TaskListenMiddleware(engine, request_view))
    return True

"""``notifications/tasks`` on ``subscriptions/listen`` streams, through the SDK's public
middleware seam (``Server.middleware`` / ``MCPServer.middleware``).

The SDK's ``ListenHandler`` serves the core filters (tools, prompts, resources) and owns
the stream, but its acknowledgment drops ``taskIds`` and its event bus carries a closed set
of event kinds. So a listen request that names ``taskIds`` is taken by this middleware,
which checks it (-32021 / -32602, before anything is sent: HTTP 400), then serves it one of
two ways:

* **Beside the SDK's handler** (the server has one): the handler still serves the
  request's other filters; the honoured ``taskIds`` are added to its acknowledgment as it
  is sent, and only then do task notifications follow on the same stream.
* **Alone** (the server has no ``subscriptions/listen`` handler, as a FastMCP server): the
  middleware acknowledges the honoured ``taskIds`` only (nothing serves the core filters,
  so they are not honoured and left out), sends the task notifications and ends the
  stream with its result.

Either way each notification is stamped with the subscription id, a request without
``taskIds`` passes through untouched, and a stream opened with a token ends with its
result when the token expires or is refused on a re-check (:mod:`.listen_authority`).
See docs/architecture.md, "Status notifications: the SDK seam".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel.server import Server
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    SERVER_INFO_META_KEY,
    Notification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from mcp_tasks.adapters.listen_authority import ListenAuthority
from mcp_tasks.engine import errors
from mcp_tasks.engine.task_watch import TASKS_NOTIFICATION, requested_task_ids, watch_tasks
from mcp_tasks.telemetry import METHOD, STATUS, SpanScope

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.session import ServerSession
    from mcp_types import RequestId

    from mcp_tasks.engine import TaskEngine
    from mcp_tasks.engine.request_view import RequestView
    from mcp_tasks.engine.task_watch import TaskWatch

    ViewOf = Callable[[ServerRequestContext[Any, Any]], RequestView]

logger = logging.getLogger(__name__)

LISTEN_METHOD = "subscriptions/listen"
#: The core filters the SDK's own handler serves.
CORE_FILTERS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


class TasksNotification(Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """``notifications/tasks``: a ``DetailedTask`` and the subscription id in ``_meta``."""

    method: Literal["notifications/tasks"] = TASKS_NOTIFICATION
    params: dict[str, Any]


def acknowledgment(
    honoured: SubscriptionFilter | None, task_ids: list[str], meta: Mapping[str, Any] | None
) -> SubscriptionsAcknowledgedNotification:
    """The acknowledgment of ``honoured`` (the core filters served, if any) plus the
    watched ``task_ids``."""
    fields = honoured.model_dump(by_alias=True, mode="json", exclude_none=True) if honoured else {}
    fields["taskIds"] = list(task_ids)
    return SubscriptionsAcknowledgedNotification(
        params=SubscriptionsAcknowledgedNotificationParams(
            notifications=SubscriptionFilter.model_validate(fields),
            _meta=dict(meta) if meta is not None else None,
        )
    )


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
            params = notification.params
            notification = acknowledgment(params.notifications, self._task_ids, params.meta)
            await self._session.send_notification(notification, related_request_id)
            self.acknowledged.set()
            return
        await self._session.send_notification(notification, related_request_id)


class _TaskStream:
    """One listen request's task notifications, on its own response stream."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], watch: TaskWatch, server: Server[Any] | None
    ) -> None:
        self.ctx = ctx
        self.watch = watch
        self.server = server
        self.subscription_id: RequestId = cast("RequestId", ctx.request_id)
        self.meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: self.subscription_id}

    async def send_changes(self) -> None:
        """Each watched task's state, then each change, until none is live."""
        async for body in self.watch.notifications():
            body["_meta"] = dict(self.meta)
            status = body.get("status")
            with SpanScope(
                "mcp_tasks.notify",
                {METHOD: TASKS_NOTIFICATION, STATUS: status if isinstance(status, str) else ""},
                kind=SpanKind.PRODUCER,
            ):
                await self.ctx.session.send_notification(
                    cast("Any", TasksNotification(params=body)),
                    related_request_id=self.subscription_id,
                )

    async def while_authorized(
        self, serve: Awaitable[HandlerResult], authority: ListenAuthority
    ) -> HandlerResult:
        """``serve``'s result, or the graceful end as soon as ``authority`` lapses: the
        client listens again with a fresh token."""
        served: list[HandlerResult] = []
        async with anyio.create_task_group() as tg:

            async def serving() -> None:
                served.append(await serve)
                tg.cancel_scope.cancel()

            tg.start_soon(serving)
            await authority.lapsed()
            tg.cancel_scope.cancel()
        return served[0] if served else self.end()

    def end(self) -> HandlerResult:
        """The graceful end. It is ours to shape (the SDK's pipeline does not touch a
        middleware's own result), so it gets the ``serverInfo`` stamp the SDK adds to its
        results when the server is known."""
        meta = dict(self.meta)
        if self.server is not None:
            meta[SERVER_INFO_META_KEY] = self.server.server_info_stamp
        return SubscriptionsListenResult(_meta=meta)

    async def alone(self) -> HandlerResult:
        """Serve the request with no SDK handler: acknowledge the watched tasks (nothing
        serves the core filters: they are not honoured), send their changes, end."""
        await self.ctx.session.send_notification(
            acknowledgment(None, self.watch.task_ids, self.meta),
            related_request_id=self.subscription_id,
        )
        await self.send_changes()
        return self.end()

    async def beside(self, call_next: CallNext, notifications: Mapping[str, Any]) -> HandlerResult:
        """Serve the request beside the SDK's handler, which serves the other filters and
        sends the acknowledgment (with the watched tasks added)."""
        ctx = self.ctx
        session = _AckWithTasks(ctx.session, self.watch.task_ids)
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
            await self.send_changes()
            if tasks_only:
                tg.cancel_scope.cancel()
        if failure:
            raise failure[0]
        if outcome:
            return outcome[0]
        return self.end()


class TaskListenMiddleware:
    """Serves ``taskIds`` on ``subscriptions/listen`` for one engine (a ``ServerMiddleware``).

    ``server`` is the low-level ``Server`` whose chain this is on, when there is one: a
    request it has no ``subscriptions/listen`` handler for is served by this middleware
    alone. Without it (an ``MCPServer``) the SDK's handler is always there. ``verifier``:
    the server's token verifier, when known."""

    def __init__(
        self,
        engine: TaskEngine,
        request_view: ViewOf,
        server: Server[Any] | None = None,
        verifier: TokenVerifier | None = None,
    ) -> None:
        self.engine = engine
        self._request_view = request_view
        self._server = server
        #: The server's token verifier, when known: a stream's token is checked again with it.
        self.verifier = verifier

    def __repr__(self) -> str:
        return "TaskListenMiddleware()"

    def _alone(self) -> bool:
        """Whether the server has no listen handler of its own (looked up per request: a
        handler may be registered after the middleware)."""
        server = self._server
        return server is not None and server.get_request_handler(LISTEN_METHOD) is None

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
        alone = self._alone()
        if alone:
            _check_params(params)
        token = get_access_token()
        async with watch_tasks(self.engine, view, task_ids) as watch:
            stream = _TaskStream(ctx, watch, self._server)
            serve = stream.alone() if alone else stream.beside(call_next, notifications)
            if token is None:
                return await serve
            recheck_s = self.engine.options.listen_token_recheck_s
            authority = ListenAuthority(token, self.verifier, recheck_s=recheck_s)
            return await stream.while_authorized(serve, authority)


def _check_params(params: Mapping[str, Any]) -> None:
    """The check the SDK makes of a spec method's params before its handler (-32602), for
    a request no handler of the SDK's sees."""
    try:
        SubscriptionsListenRequestParams.model_validate(params, by_name=False)
    except ValidationError:
        raise errors.invalid_params("Invalid subscriptions/listen params") from None


def serve_task_notifications(
    engine: TaskEngine,
    server: object,
    request_view: ViewOf,
    verifier: TokenVerifier | None = None,
) -> bool:
    """Add the middleware to ``server`` (an SDK ``Server``, including FastMCP's low-level
    one, or an ``MCPServer``) once, with the server's token ``verifier`` when it is known;
    ``False`` when ``server`` has no middleware chain."""
    chain = getattr(server, "middleware", None)
    if not isinstance(chain, list):
        return False
    if not any(isinstance(m, TaskListenMiddleware) and m.engine is engine for m in chain):
        lowlevel = server if isinstance(server, Server) else None
        chain.append(TaskListenMiddleware(engine, request_view, lowlevel, verifier))
    return True

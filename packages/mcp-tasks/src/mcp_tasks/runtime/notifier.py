"""Task-changed signals: wake runners, waiters and listen streams when a task changes.

One concept, several reaches. :class:`LocalNotifier` delivers within one process;
:class:`RelayNotifier` adds a :class:`Relay` (Postgres ``LISTEN/NOTIFY``, Redis pub/sub, a
MongoDB change stream, a SQLite file's data version) so a signal published on one process
wakes every process on the same store. A durable store offers its relay itself
(:class:`OffersNotifier`, asked by :func:`notifier_for`). Signals are best effort, so a
waiter re-reads the store at :data:`POLL_FALLBACK_S` at the latest, except while its
subscription is complete (:attr:`Subscription.fallback_s`): a relay that loses no signal
while it listens (Postgres, Redis, a MongoDB change stream, SQLite) is listening; then only
every :data:`LISTENING_FALLBACK_S`, for a write that sent no signal. A relay
that stops listening wakes every subscriber, and wakes them again once it listens anew, so
a signal lost in between costs one re-read, not a poll of every idle waiter.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import random
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.abc

from mcp_tasks.runtime.logs import Outage
from mcp_tasks.stores.observed import unobserved
from mcp_tasks.stores.opening import describe_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from mcp_tasks.stores.protocol import Store

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The environment variable that sets :data:`POLL_FALLBACK_S` (seconds) for a process.
POLL_FALLBACK_ENV: Final = "MCP_TASKS_POLL_FALLBACK_S"
#: The environment variable that sets :data:`LISTENING_FALLBACK_S` (seconds) for a process.
LISTENING_FALLBACK_ENV: Final = "MCP_TASKS_LISTENING_FALLBACK_S"


def _seconds_from(variable: str, default: float) -> float:
    raw = os.environ.get(variable)
    if raw is None:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"{variable} must be a positive number of seconds: {raw!r}")
    return seconds


#: How often a waiter re-reads the store when no signal came, unless its subscription is
#: complete (:attr:`Subscription.fallback_s`): the fallback for a signal lost (a relay
#: reconnecting) or never sent (notifications off, a custom notifier, a store without a
#: cross-process notifier). 2 s, or ``$MCP_TASKS_POLL_FALLBACK_S`` when set (read once,
#: at import).
POLL_FALLBACK_S: Final = _seconds_from(POLL_FALLBACK_ENV, 2.0)

#: How often a waiter re-reads the store while its subscription is complete: no signal is
#: lost then, but a write may have sent none (its process died between the write and the
#: signal, or it was made straight through a Store handle); it is read within this. Each
#: wait draws between half and all of it, so waiters that began together spread their
#: reads: 1,000 idle listen streams read the store about 22 times a second. 60 s, or
#: ``$MCP_TASKS_LISTENING_FALLBACK_S`` when set (read once, at import).
LISTENING_FALLBACK_S: Final = _seconds_from(LISTENING_FALLBACK_ENV, 60.0)

#: A pseudo task id: "claimable work may exist" (a task created for a worker, a lease
#: released). Its control character means no task can have it.
WORK_SIGNAL: Final = "\x00work"

#: What a relay carries for "any task may have changed": no digest looks like it. Sent
#: after a signal the relay failed to send, once it sends again.
ANY_TASK_KEY: Final = "*"


def signal_key(task_id: str) -> str:
    """What travels between processes for ``task_id``: a digest, never the id itself (ids
    are bearer capabilities; a pub/sub channel is readable by more parties than the tasks)."""
    return hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _never() -> bool:
    return False


class Subscription:
    """Wakes its holder when one of its tasks changed since the last wait.

    ``complete`` says whether no signal can be lost now (its notifier's
    :meth:`RelayNotifier.complete`); a subscription without one may lose signals.
    """

    def __init__(self, complete: Callable[[], bool] = _never) -> None:
        self._complete = complete
        self._event = anyio.Event()
        self._changed: set[str] = set()
        self._everything = False
        self._own = False
        self._hook: Callable[[], None] | None = None

    def signal(self, key: str | None = None) -> None:
        """Mark the task with signal key ``key`` changed (``None``: any task may have)."""
        if self._own and key is not None:  # the holder's own write (:meth:`own_change`)
            self._own = False
            return
        if key is None:
            self._everything = True
        else:
            self._changed.add(key)
        self._event.set()
        if self._hook is not None:
            self._hook()

    @property
    def fallback_s(self) -> float:
        """How long its holder waits for a signal before re-reading the store all the
        same: :data:`POLL_FALLBACK_S`, or between half and all of
        :data:`LISTENING_FALLBACK_S` while no signal can be lost (a notifier that stops
        being so wakes every subscriber, and again when it is so anew)."""
        if self._complete():
            return random.uniform(0.5, 1.0) * LISTENING_FALLBACK_S  # noqa: S311 (spread, not secrecy)
        return POLL_FALLBACK_S

    def on_signal(self, hook: Callable[[], None] | None) -> None:
        """Call ``hook`` at each signal as well (a holder that waits for many subscriptions
        at once, such as the runner's watcher, rather than in :meth:`wait`)."""
        self._hook = hook

    def own_change(self, expected: bool = True) -> None:
        """The next signal of a task is the holder's own (``expected=False``: no longer
        awaited): dropped, as the holder knows what it wrote. Set just before the holder
        publishes its write and cleared after: the notifiers here deliver to local
        subscribers within the publish call, so no other party's signal can fall between;
        one that did would be dropped in its place, and the holder's own, coming later,
        wakes it as it would have."""
        self._own = expected

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 (a bounded wait is the point)
        """Wait for a change, at most ``timeout`` seconds; ``True`` if one was signalled.

        A change signalled between two waits is not lost: the next wait returns at once.
        """
        with anyio.move_on_after(timeout):
            await self._event.wait()
        changed = self._event.is_set()
        if changed:
            self._event = anyio.Event()
        return changed

    def take_changed(self) -> frozenset[str] | None:
        """The signal keys changed since the last call; ``None`` when any may have."""
        everything, changed = self._everything, frozenset(self._changed)
        self._everything = False
        self._changed.clear()
        return None if everything else changed


@runtime_checkable
class Notifier(Protocol):
    """Publishes "task X changed" and lets interested parties wait for it.

    A signal carries no state: a woken party re-reads the Store. Delivery is best effort,
    so a waiter also wakes on a slow timeout (:attr:`Subscription.fallback_s`) and
    re-reads.
    A notifier MUST NOT raise into its callers' work; :class:`~mcp_tasks.tasks.Tasks`
    guards every call anyway (:class:`GuardedNotifier`).
    """

    async def publish(self, task_id: str) -> None:
        """Signal that ``task_id`` changed (after the store write succeeded)."""
        ...

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        """Receive signals for ``task_ids`` (none: every task) while the context is open."""
        ...

    def running(self) -> AbstractAsyncContextManager[None]:
        """Hold whatever the notifier needs to hear other processes (a connection, a
        watcher) while the context is open; ``Tasks.running`` enters it."""
        ...


class LocalNotifier:
    """A :class:`Notifier` for one process: signals reach subscribers on this node only."""

    def __init__(self) -> None:
        self._by_key: dict[str, set[Subscription]] = {}
        self._everything: set[Subscription] = set()
        self._task_ids: dict[str, str] = {}  # signal key -> task id, while subscribed

    def __repr__(self) -> str:
        return "LocalNotifier()"

    def complete(self) -> bool:
        """Whether every change is signalled now. Not here: another process (or another
        notifier in this one) writing to the store is not heard."""
        return False

    def watched(self) -> tuple[dict[str, str], bool]:
        """The task ids some subscriber waits for, by signal key, and whether a subscriber
        takes every task. For a relay that must find out itself which tasks changed (a
        SQLite file says only that something did); ids stay in this process."""
        return dict(self._task_ids), bool(self._everything)

    async def publish(self, task_id: str) -> None:
        self.deliver(signal_key(task_id))

    def deliver(self, key: str | None) -> None:
        """Wake the subscribers of signal key ``key`` (``None`` or :data:`ANY_TASK_KEY`:
        every subscriber)."""
        if key == ANY_TASK_KEY:
            key = None
        if key is None:
            targets = {s for subs in self._by_key.values() for s in subs} | self._everything
        else:
            targets = self._by_key.get(key, set()) | self._everything
        for subscription in targets:
            subscription.signal(key)

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        return self._subscribe({signal_key(t): t for t in task_ids}, not task_ids)

    def running(self) -> AbstractAsyncContextManager[None]:
        return _nothing()

    @asynccontextmanager
    async def _subscribe(
        self, keys: dict[str, str], everything: bool
    ) -> AsyncIterator[Subscription]:
        subscription = Subscription(self.complete)
        if everything:
            self._everything.add(subscription)
        for key, task_id in keys.items():
            self._by_key.setdefault(key, set()).add(subscription)
            self._task_ids[key] = task_id
        try:
            yield subscription
        finally:
            self._everything.discard(subscription)
            for key in keys:
                subscribers = self._by_key.get(key)
                if subscribers is not None:
                    subscribers.discard(subscription)
                    if not subscribers:
                        del self._by_key[key]
                        self._task_ids.pop(key, None)


class Relay(Protocol):
    """Carries signal keys between processes sharing one store (what a backend brings)."""

    async def send(self, key: str) -> None:
        """Tell every process (this one included, or not: duplicates are harmless)."""
        ...

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        """Call ``deliver(key)`` for each key any process sends, until cancelled; call
        ``ready()`` once listening. Raise when the connection is lost: the notifier logs
        it, calls ``deliver(None)`` (signals may have been missed) and calls this again."""
        ...

    #: Whether, between ``ready()`` and the failure of :meth:`receive`, every key sent is
    #: delivered (or ``deliver(None)`` called in its place). While it is, subscribers do
    #: not poll the store. Optional: a relay without it is taken as lossy.
    #: complete: bool

    async def aclose(self) -> None:
        """Free connections."""
        ...


#: How long starting a relay waits for it to listen before going on without it.
RELAY_START_TIMEOUT_S: Final = 10.0
#: The pause before a failed relay listens again.
RELAY_RETRY_S: Final = 1.0


class RelayNotifier(LocalNotifier):
    """A :class:`LocalNotifier` whose signals also reach other processes through a relay.

    Local subscribers are woken at once; the relay's copy (or another process's signal)
    wakes them again, which is harmless. While :meth:`running` is not open, it is local
    only.
    """

    def __init__(self, relay: Relay, *, store_name: str | None = None) -> None:
        super().__init__()
        self.relay = relay
        #: How the relay's store is named in logs (its masked URL; see :func:`notifier_for`).
        self.store_name = store_name if store_name is not None else repr(relay)
        self._running_depth = 0
        self._listening = False  # the relay's receiver listens (ready, not failed since)
        self._unsent = False  # a signal failed to go out: say "any task" at the next send

    def __repr__(self) -> str:
        return f"RelayNotifier({self.relay!r})"

    def complete(self) -> bool:
        """Whether every change is signalled now: the relay listens and is complete
        (:class:`Relay`). Another process's write is heard through the relay, this
        process's from its publish."""
        return self._listening and bool(getattr(self.relay, "complete", False))

    async def publish(self, task_id: str) -> None:
        if self._running_depth:
            await self.send(task_id)
        else:
            self.deliver(signal_key(task_id))

    async def send(self, task_id: str) -> None:
        """Wake the local subscribers and send the signal through the relay now, running
        or not (the relay opens its sending connection if it has none). A signal that
        failed to go out is followed, at the next send that succeeds, by
        :data:`ANY_TASK_KEY`: the other processes' subscribers, which do not poll while
        their relay listens, re-read then."""
        key = signal_key(task_id)
        self.deliver(key)
        try:
            await self.relay.send(key)
            if self._unsent:
                await self.relay.send(ANY_TASK_KEY)
                self._unsent = False
        except BaseException:
            self._unsent = True
            raise

    async def close_relay(self) -> None:
        """Close the relay's connections; a failure is logged, never raised."""
        try:
            await self.relay.aclose()
        except Exception:
            logger.warning("closing the change relay failed", exc_info=True)

    def running(self) -> AbstractAsyncContextManager[None]:
        return self._running()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        self._running_depth += 1
        if self._running_depth > 1:  # entered twice (nested lifespans): the outer one listens
            try:
                yield
            finally:
                self._running_depth -= 1
            return
        try:
            async with anyio.create_task_group() as tg:
                ready, settled = anyio.Event(), anyio.Event()
                tg.start_soon(self._receive_forever, ready, settled)
                with anyio.move_on_after(RELAY_START_TIMEOUT_S):
                    await settled.wait()  # listening, or failed once (said and retrying)
                if not ready.is_set():
                    logger.warning("the change relay is not listening yet; polling meanwhile")
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._running_depth -= 1
            with anyio.CancelScope(shield=True):
                await self.close_relay()

    async def _receive_forever(self, ready: anyio.Event, settled: anyio.Event) -> None:
        """Run the relay's receiver; one that fails is started again (signals are missed
        meanwhile, so every subscriber is woken to re-read, polls while it is away, and is
        woken once more when it listens again: a signal lost in between is read then).
        Its failures are said as one outage of the store
        (:class:`~mcp_tasks.runtime.logs.Outage`), its return to listening too.
        ``settled`` is set once it listens or has failed once."""
        outage = Outage(logger, "the change relay", self.store_name)
        failed = False

        def listening() -> None:
            self._listening = True
            ready.set()
            settled.set()
            outage.recovered()
            if failed:
                self.deliver(None)

        try:
            while True:
                try:
                    await self.relay.receive(self.deliver, listening)
                except Exception as exc:
                    outage.failed(exc)
                was_listening, self._listening = self._listening, False
                failed = True
                settled.set()
                if was_listening:  # those waiting forever poll from now on
                    self.deliver(None)
                await anyio.sleep(RELAY_RETRY_S)
        finally:
            self._listening = False


class NullNotifier:
    """Notifications off (``Tasks(notifier=None)``): nothing is published, subscribers are
    never woken, waiters poll at :data:`POLL_FALLBACK_S` and listen streams watch no task."""

    def __repr__(self) -> str:
        return "NullNotifier()"

    async def publish(self, task_id: str) -> None:
        return None

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        return _dormant()

    def running(self) -> AbstractAsyncContextManager[None]:
        return _nothing()


class GuardedNotifier:
    """Wraps a notifier so that its failures never fail a request or a worker: an
    exception is logged and swallowed, and a subscription that cannot be made is dormant
    (its holder falls back to polling)."""

    def __init__(self, inner: Notifier) -> None:
        self.guard(inner)

    def __repr__(self) -> str:
        return f"GuardedNotifier({self.inner!r})"

    @property
    def inner(self) -> Notifier:
        """The notifier guarded."""
        return self._inner

    def guard(self, inner: Notifier) -> None:
        """Guard ``inner`` from now on (``Tasks.use_store`` gives it the new store's,
        before anything runs)."""
        self._inner = inner
        self._publishing = publishing_outage(inner)

    @property
    def enabled(self) -> bool:
        """Whether signals are published at all (``False`` for :class:`NullNotifier`)."""
        return not isinstance(self.inner, NullNotifier)

    async def publish(self, task_id: str) -> None:
        try:
            await self.inner.publish(task_id)
        except Exception as exc:
            self._publishing.failed(exc)
        else:
            self._publishing.recovered()

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        return _guarded(lambda: self.inner.subscribe(*task_ids), Subscription, "subscribe")

    def running(self) -> AbstractAsyncContextManager[None]:
        return _guarded(self.inner.running, lambda: None, "start")


def publishing_outage(notifier: Notifier) -> Outage:
    """How failed publishes are said: a relay that cannot send (its store away) once per
    outage, in one line with its cause, not a traceback per change (nothing is lost for
    long: a relay's next send that succeeds tells every process to re-read, and waiters
    that can miss signals poll)."""
    where = notifier.store_name if isinstance(notifier, RelayNotifier) else repr(notifier)
    return Outage(logger, "publishing task changes", where)


@asynccontextmanager
async def _guarded(
    enter: Callable[[], AbstractAsyncContextManager[T]], fallback: Callable[[], T], what: str
) -> AsyncIterator[T]:
    """``enter()``'s context with its failures logged and swallowed: one that cannot be
    entered yields ``fallback()`` (its holder polls instead); one that fails on exit is
    logged. An exception of the block itself goes through untouched."""
    try:
        entered = enter()
        value = await entered.__aenter__()
    except Exception:
        logger.warning("the notifier failed to %s; polling instead", what, exc_info=True)
        yield fallback()
        return
    try:
        yield value
    except BaseException as exc:
        try:
            if await entered.__aexit__(type(exc), exc, exc.__traceback__):
                return
        except Exception as failure:
            if failure is not exc:
                logger.warning("the notifier failed to clean up", exc_info=True)
        raise
    try:
        await entered.__aexit__(None, None, None)
    except Exception:
        logger.warning("the notifier failed to clean up", exc_info=True)


@runtime_checkable
class OffersNotifier(Protocol):
    """A store that offers a notifier reaching every process on it (a store ability, as
    those of :mod:`mcp_tasks.stores.abilities`): Postgres ``LISTEN/NOTIFY``, Redis
    pub/sub, a MongoDB change stream, a SQLite file's data version."""

    def offer_notifier(self) -> Notifier | None:
        """A new notifier on this store's namespace (``None``: none after all). Building
        it does no I/O: it connects when it runs."""
        ...


def notifier_for(store: Store) -> Notifier:
    """The default notifier for ``store``: the cross-process one it offers
    (:class:`OffersNotifier`), else a :class:`LocalNotifier`."""
    store = unobserved(store)
    if isinstance(store, OffersNotifier):
        try:
            offered = store.offer_notifier()
        except Exception:
            logger.warning("the store's notifier could not be built", exc_info=True)
            offered = None
        if isinstance(offered, RelayNotifier) and offered.store_name == repr(offered.relay):
            offered.store_name = describe_store(store)
        if offered is not None:
            return offered
    return LocalNotifier()


class Publisher:
    """Publishes changes without listening for any: what a process that only writes (an
    external job system's worker, through ``TaskControl``) needs.

    A :class:`RelayNotifier` sends through its relay only while :meth:`~Notifier.running`
    is open, and running it also listens (a connection, a watcher) for nothing here. So
    for a notifier it ``owns`` (built for it from the store), the publisher sends each
    signal through the relay at once: the relay opens its connection at the first send,
    and :meth:`aclose` frees it (a later publish opens it again). Any other notifier is
    published to as is (one that runs elsewhere, such as a ``Tasks``'). A failure is
    logged and swallowed: it follows a write that succeeded.
    """

    def __init__(self, notifier: Notifier, *, owned: bool) -> None:
        self.notifier = notifier
        #: The owned relay notifier this publisher sends through itself, if any.
        self._relay = notifier if owned and isinstance(notifier, RelayNotifier) else None
        self._publishing = publishing_outage(notifier)

    def __repr__(self) -> str:
        return f"Publisher({self.notifier!r})"

    async def publish(self, task_id: str) -> None:
        try:
            if self._relay is not None:
                await self._relay.send(task_id)
            else:
                await self.notifier.publish(task_id)
        except Exception as exc:
            self._publishing.failed(exc)
        else:
            self._publishing.recovered()

    async def aclose(self) -> None:
        """Free what publishing opened (only for an owned notifier)."""
        if self._relay is not None:
            await self._relay.close_relay()


def publisher_for(store: Store) -> Publisher:
    """A :class:`Publisher` through ``store``'s own notifier (:func:`notifier_for`): every
    process on the store hears it, when the store's backend offers a cross-process one."""
    return Publisher(notifier_for(store), owned=True)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


@asynccontextmanager
async def _dormant() -> AsyncIterator[Subscription]:
    yield Subscription()

"""The one declaration of what a store offers beyond the contract proper."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final

#: Each field of :class:`Offers`, the optional behaviour it declares (``rules.OPTIONAL``).
BEHAVIOURS: Final[dict[str, str]] = {
    "clock": "O-CLOCK",
    "namespaces": "O-NAMESPACES",
    "notifier": "O-NOTIFIER",
    "server_restart": "O-RESTART",
    "rewrite": "O-REWRITE",
    "counts": "O-COUNTS",
}


@dataclass(frozen=True)
class Offers:
    """The optional behaviours a store offers: set ``offers = Offers(...)`` on your
    ``StoreContract`` subclass. The suite proves each behaviour declared here and reports
    the others "not offered" (their tests skip, saying so); nothing else is optional.
    """

    clock: bool = False
    """The store takes an injected clock: the ``store_clock`` fixture then gives a
    :class:`~mcp_tasks.ManualClock`, which the ``store`` factory hands to every handle; the
    suite moves time by advancing it instead of waiting."""
    namespaces: bool = False
    """A handle's ``url`` names a namespace of a registered backend that
    :func:`mcp_tasks.namespaced_url` can point at another and :func:`mcp_tasks.drop_namespace`
    can drop (``StoreBackend.namespaced`` and ``drop``)."""
    notifier: bool = False
    """The store offers a cross-process notifier
    (:class:`~mcp_tasks.runtime.notifier.OffersNotifier`): ``notifier_for(handle)`` relays
    across handles."""
    server_restart: bool = False
    """Acknowledged writes survive a restart of the store's server: override the
    ``store_server_restart`` fixture with a coroutine function that restarts it."""

    rewrite: bool = False
    """The store rewrites its tasks in place for an operator's maintenance
    (:class:`~mcp_tasks.stores.abilities.Rewrites`, ``mcp-tasks rekey``): every task once,
    in id order, only its payload, with a compare-and-set."""

    counts: bool = False
    """The store keeps its counts as it writes
    (:class:`~mcp_tasks.stores.abilities.CountsReader`, ``counts()``: what the gauges
    read): exactly the rows and unexpired tasks per status ``stats()`` gives, across
    concurrent writes, expiry and reaps (checked by ``StatsContract``)."""

    def not_offered(self) -> list[str]:
        """The ids of the optional behaviours this declaration leaves out."""
        return [BEHAVIOURS[f.name] for f in fields(self) if not getattr(self, f.name)]

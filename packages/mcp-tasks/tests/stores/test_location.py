"""A store URL is read once, into a StoreLocation; what a store offers is asked by type."""

from __future__ import annotations

import pytest

from mcp_tasks import MemoryTaskStore, StoreLocation, StoreOptions, store_from_url
from mcp_tasks.runtime.notifier import LocalNotifier, OffersNotifier, notifier_for
from mcp_tasks.stores.abilities import Configured, Diagnoses, Located, Migrates, StatsReader
from mcp_tasks.stores.observed import ObservedStore, observed, unobserved
from mcp_tasks.stores.opening import describe_store, locate


def test_the_shared_parts_of_a_url_are_read_once() -> None:
    """``StoreLocation.read`` takes the scheme, ``?timeout_ms=`` and the password; the other
    parameters stay in ``query``; ``masked`` hides the password."""
    location = StoreLocation.read("postgres://u:s3cret@h/db?schema=x&timeout_ms=250")
    assert location.scheme == "postgres"
    assert location.timeout_ms == 250
    assert location.password == "s3cret"
    assert dict(location.query) == {"schema": "x"}
    assert location.masked == "postgres://u:***@h/db?schema=x&timeout_ms=250"
    assert "s3cret" not in repr(location)
    assert location.stripped("schema") == "postgres://u:s3cret@h/db"
    assert StoreLocation.read("Memory://").scheme == "memory"
    assert location.options(StoreOptions(max_rows=7)) == StoreOptions(max_rows=7, timeout_ms=250)


@pytest.mark.parametrize("url", ["memory", "memory://x?timeout_ms=0", "memory://x?timeout_ms=1.5"])
def test_a_url_the_core_cannot_read_is_a_value_error(url: str) -> None:
    """No ``scheme://``, or a ``?timeout_ms=`` that is no positive whole number."""
    with pytest.raises(ValueError, match=r"scheme|timeout_ms"):
        StoreLocation.read(url)


def test_the_backend_reads_its_namespace_and_the_store_keeps_the_location() -> None:
    """The memory backend's ``locate`` sets the namespace and the form people see; the store
    opened there names itself by it, with the URL's bound applied to its options."""
    location = locate("memory://shared?timeout_ms=40")
    assert (location.namespace, location.masked) == ("shared", "memory://shared")
    store = store_from_url("memory://shared?timeout_ms=40")
    assert isinstance(store, Located)
    assert store.location.namespace == "shared"
    assert isinstance(store, Configured)
    assert store.options.timeout_ms == 40
    assert describe_store(store) == describe_store(observed(store)) == "memory://shared"


def test_abilities_are_asked_of_the_store_an_observed_store_wraps() -> None:
    """The observed store offers the ten operations only; ``unobserved`` is the store to ask."""
    store = MemoryTaskStore()
    wrapped = observed(store)
    assert isinstance(wrapped, ObservedStore)
    assert not isinstance(wrapped, StatsReader)
    assert not isinstance(wrapped, Located)
    assert unobserved(wrapped) is store
    assert isinstance(store, StatsReader)
    assert not isinstance(store, Migrates | Diagnoses)


def test_a_store_without_a_notifier_of_its_own_gets_a_local_one() -> None:
    """A store that offers no notifier (no ``offer_notifier``) is signalled in-process."""
    store = MemoryTaskStore()
    assert not isinstance(store, OffersNotifier)
    assert isinstance(notifier_for(observed(store)), LocalNotifier)

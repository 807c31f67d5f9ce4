"""Opening stores by URL: schemes, namespaces, dropping, the install line for a missing extra."""

from __future__ import annotations

import pytest

from mcp_tasks import (
    ANY_OWNER,
    MemoryTaskStore,
    NamespacesNotSupported,
    NewTask,
    StoreNotInstalled,
    StoreOptions,
    TaskNotFound,
    UnknownStoreScheme,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks.stores import opening
from mcp_tasks.stores.opening import InvalidStoreURL, describe_store


@pytest.mark.anyio
async def test_memory_url_gives_a_memory_store_with_the_options() -> None:
    """memory:// is registered by the core distribution itself and takes StoreOptions."""
    options = StoreOptions(max_rows=7)
    store = store_from_url("memory://", options)
    assert isinstance(store, MemoryTaskStore)
    assert store.options == options
    await store.close()


def test_scheme_is_case_insensitive() -> None:
    """MEMORY:// finds the same store as memory://."""
    assert isinstance(store_from_url("MEMORY://"), MemoryTaskStore)


def test_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no URL given, MCP_TASKS_STORE_URL is used."""
    monkeypatch.setenv("MCP_TASKS_STORE_URL", "memory://")
    assert isinstance(store_from_url(), MemoryTaskStore)


def test_no_url_anywhere_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No URL and no MCP_TASKS_STORE_URL: the message says how to give one."""
    monkeypatch.delenv("MCP_TASKS_STORE_URL", raising=False)
    with pytest.raises(UnknownStoreScheme, match="MCP_TASKS_STORE_URL"):
        store_from_url()


def test_url_without_scheme_is_refused() -> None:
    """A bare path is not a store URL."""
    with pytest.raises(UnknownStoreScheme, match="needs a scheme"):
        store_from_url("tasks.db")


def test_unknown_scheme_points_to_the_entry_point_group() -> None:
    """A scheme nobody registers is refused, naming the group a third-party store uses; it is
    also a ValueError."""
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url("nosuchstore://host/db")
    assert "nosuchstore://" in str(caught.value)
    assert "'mcp_tasks.stores'" in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("sqlite:///tasks.db", "sqlite"),
        ("postgresql://postgres@127.0.0.1/test", "postgres"),
        ("postgres://postgres@127.0.0.1/test", "postgres"),
        ("redis://127.0.0.1:6379/0", "redis"),
        ("rediss://127.0.0.1:6379/0", "redis"),
        ("redis+unix:///run/redis.sock?db=0", "redis"),
        ("mongodb://127.0.0.1:27017/db", "mongodb"),
        ("mongodb+srv://cluster.example/db", "mongodb"),
    ],
)
def test_known_but_missing_store_names_the_exact_install_line(
    monkeypatch: pytest.MonkeyPatch, url: str, extra: str
) -> None:
    """An in-repo backend that is not installed fails with the exact pip install line.

    The entry points are emptied so the message is checked whichever siblings this
    environment happens to have installed.
    """
    monkeypatch.setattr(opening, "entry_points", lambda **_: [])
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    assert str(caught.value).endswith(f'pip install "mcp-tasks[{extra}]"')
    assert url.split("://", 1)[1] not in str(caught.value)
    assert isinstance(caught.value, StoreNotInstalled)
    assert str(caught.value).startswith(f"The {url.split(':', 1)[0]}:// store is not installed;")
    assert (
        f'from a clone: pip install "./packages/mcp-tasks[{extra}]" ./packages/mcp-tasks-*'
        in str(caught.value)
    )


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("sqllite:///x.db", "sqlite:///x.db"),
        ("SQLLITE:///x.db", "sqlite:///x.db"),
        ("postgres+asyncpg://tasks:s3cret@db/tasks", "postgres://tasks:***@db/tasks"),
        ("postgresql+psycopg://db/tasks", "postgresql://db/tasks"),
        ("sqlite+aiosqlite:///x.db", "sqlite:///x.db"),
        ("postgress://db/tasks", "postgres://db/tasks"),
        ("mongo://db/tasks", "mongodb://db/tasks"),
        ("memroy://", "memory://"),
    ],
)
def test_a_scheme_close_to_an_installed_one_gets_the_url_it_meant(url: str, meant: str) -> None:
    """A typo or a SQLAlchemy driver suffix: the message names the URL probably meant
    (password masked) and every installed scheme."""
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    message = str(caught.value)
    assert f"; did you mean {meant}? (installed: memory://, " in message
    assert "s3cret" not in message
    assert not isinstance(caught.value, StoreNotInstalled)


@pytest.mark.parametrize("url", ["nosuchstore://127.0.0.1:27017/db"])
def test_no_install_line_names_an_extra_that_does_not_exist(url: str) -> None:
    """Only extras that exist are named: schemes of stores not built yet get the generic
    answer, with no pip install line."""
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    assert "pip install" not in str(caught.value)


@pytest.mark.anyio
async def test_a_named_memory_store_is_shared_until_dropped() -> None:
    """memory://NAME: every store of that URL shares its tasks (like connections to one
    database); memory:// alone is private; drop_namespace empties and forgets the name."""
    first, second = store_from_url("memory://shared-ns"), store_from_url("memory://shared-ns")
    private = store_from_url("memory://")
    task = await first.create(NewTask(task_id=new_task_id()))
    assert await second.get(task.task_id, ANY_OWNER) == task
    with pytest.raises(TaskNotFound):
        await private.get(task.task_id, ANY_OWNER)
    await drop_namespace("memory://shared-ns")
    with pytest.raises(TaskNotFound):
        await second.get(task.task_id, ANY_OWNER)
    with pytest.raises(TaskNotFound):
        await store_from_url("memory://shared-ns").get(task.task_id, ANY_OWNER)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory://", "memory://ns1"),
        ("memory://other", "memory://ns1"),
        ("sqlite:///tasks.db", "sqlite:///tasks.db?table_prefix=ns1_"),
        ("sqlite:////abs/t.db?table_prefix=x_", "sqlite:////abs/t.db?table_prefix=ns1_"),
        ("postgresql://u@h/db", "postgresql://u@h/db?schema=ns1"),
        (
            "postgresql://u@h/db?schema=a&sslmode=disable",
            "postgresql://u@h/db?sslmode=disable&schema=ns1",
        ),
        ("redis://h:6379/0", "redis://h:6379/0?prefix=ns1"),
        ("rediss://u:pw@h:6380/2?prefix=a", "rediss://u:pw@h:6380/2?prefix=ns1"),
        ("redis+unix:///run/redis.sock?db=0", "redis+unix:///run/redis.sock?db=0&prefix=ns1"),
    ],
)
def test_the_namespace_is_part_of_the_url(url: str, expected: str) -> None:
    """Each backend names its namespace in the URL: a memory name, a SQLite table prefix, a
    Postgres schema, a Redis key prefix; the rest of the URL is kept."""
    assert namespaced_url(url, "ns1") == expected


@pytest.mark.parametrize("namespace", ["", "a-b", "x;drop", "ü"])
def test_a_namespace_is_letters_digits_and_underscores(namespace: str) -> None:
    with pytest.raises(ValueError, match="letters, digits and '_'"):
        namespaced_url("memory://", namespace)


def test_a_url_its_backend_cannot_read_is_invalid_when_namespaced_too() -> None:
    """namespaced_url says what store_from_url says of a URL the backend cannot read."""
    with pytest.raises(InvalidStoreURL) as caught:
        namespaced_url("sqlite://relative.db", "ns1")
    assert str(caught.value) == (
        "sqlite://relative.db: A SQLite store URL looks like sqlite:///path/to/tasks.db"
    )


def test_a_store_is_described_by_its_url_with_the_password_masked() -> None:
    store = store_from_url("postgresql://me:secret@db.example:5432/app?schema=jobs")
    assert describe_store(store) == "postgresql://me:***@db.example:5432/app?schema=jobs"
    assert "secret" not in repr(store)


class _Entry:
    """An entry point as importlib.metadata gives it (only what store_from_url reads)."""

    def __init__(self, loaded: object) -> None:
        self._loaded = loaded

    def load(self) -> object:
        return self._loaded


def test_a_plain_factory_entry_point_opens_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party store may register a bare URL → Store factory; it opens stores, and has
    no namespaces to point at or drop."""
    opened: list[str] = []

    def factory(url: str, options: StoreOptions | None = None) -> MemoryTaskStore:
        opened.append(url)
        return MemoryTaskStore(options)

    monkeypatch.setattr(opening, "entry_points", lambda **_: [_Entry(factory)])
    assert isinstance(store_from_url("thirdparty://x"), MemoryTaskStore)
    assert opened == ["thirdparty://x"]
    with pytest.raises(NamespacesNotSupported):
        namespaced_url("thirdparty://x", "ns")


def test_a_url_its_backend_cannot_read_is_invalid_store_url() -> None:
    """A backend's ValueError becomes InvalidStoreURL (still a ValueError) naming the URL,
    password masked, and the backend's expected form."""
    with pytest.raises(InvalidStoreURL) as caught:
        store_from_url("sqlite://relative.db")
    assert str(caught.value) == (
        "sqlite://relative.db: A SQLite store URL looks like sqlite:///path/to/tasks.db"
    )
    assert isinstance(caught.value, ValueError)
    with pytest.raises(InvalidStoreURL) as caught:
        store_from_url("postgresql://u:s3cret@localhost/db?schema=Bad-Name")
    assert "s3cret" not in str(caught.value)
    assert str(caught.value).startswith("postgresql://u:***@localhost/db?schema=Bad-Name: ")

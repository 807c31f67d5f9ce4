"""docs/store-contract.md, run and checked against the code it describes.

* "Write your own store": the page's store and the page's test class run the contract's
  S-PUT.4 test in pytest, in a folder of their own: it passes; with a finished task made
  changeable (the plant test_third_party uses), it fails as the page's output shows. The
  whole suite on this store is contract_tests/tests/meta/test_third_party.py's (on
  examples/minimal_store.py, which test_contract_doc.py holds equal to the page's block).
* The operation signatures and STORE_OPERATIONS are the Store protocol's, as written.
* "With the CLI": the page's `mcp-tasks contract mypkg.testing:open_store -- -k
  test_terminal_tasks_are_final` on that planted store (a factory module named as the page
  names it) ends with the page's lines; the run's Hypothesis seed stands for any.
* "Writing a store backend": the page's backend object, in a package ``my_store`` whose
  store is the glue's (the page's minimal store behind the page's constructor), registered
  by the page's entry-point table in a ``.dist-info`` of its own, opens, namespaces and drops
  ``mystore://`` URLs through ``store_from_url``, in a process of its own; it is the
  scheme's test-server provisioner, which gives ``MCP_TASKS_TEST_MYSTORE_URL`` and without
  it refuses with the page's reason.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from typing import TYPE_CHECKING

from markdown_blocks import REPO, PageBlocks, run_program
from transcripts import argv, environment

from mcp_tasks.stores import protocol
from mcp_tasks.stores.opening import ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType


def third_party_set_up() -> ModuleType:
    """The third-party set-up contract_tests/tests/meta/test_third_party.py runs the whole
    suite with (the plant, the factory module of `mcp-tasks contract`), loaded by its path:
    that folder is not on this session's path."""
    path = REPO / "contract_tests" / "tests" / "meta" / "third_party_store.py"
    spec = importlib.util.spec_from_file_location("third_party_store", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


THIRD_PARTY = third_party_set_up()
PAGE = PageBlocks("docs/store-contract.md")
MINIMAL_STORE = PAGE.take('"""A complete Store in one file')
TEST_CLASS = PAGE.take("class TestDictStore(StoreContract):")
BROKEN = PAGE.take("contract rule broken: S-PUT.4")
OPERATIONS = PAGE.take("STORE_OPERATIONS = (")
#: The operations' signature blocks (their ``: ...`` tells them from the store above).
SIGNATURES = [
    PAGE.take(snippet)
    for snippet in (
        "async def create(self, task: NewTask) -> TaskRecord: ...",
        "async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord: ...",
        "async def update(",
        "async def cancel(self, task_id: str, owner: OwnerArg) -> Transition: ...",
        "async def put_status(",
        ") -> Claimed | None: ...",
        "async def renew(self, lease: Lease, *, lease_ms: int) -> Lease: ...",
        "async def release(self, lease: Lease) -> None: ...",
        "async def reap(self, *, limit: int = 500) -> int: ...",
        "async def close(self) -> None: ...",
    )
]
STORES_TABLE = PAGE.take('[project.entry-points."mcp_tasks.stores"]')
BACKEND = PAGE.take("class MyStoreBackend:")
PAGE.explain(
    "UNAVAILABLE = DriverErrors(mysql.connector.Error",
    "a sketch of a driver-backed store (its SQL left as `...`); examples/mysql_store is "
    "the whole store, run by nox -s mysql-example",
)
PAGE.explain(
    "def offer_notifier(self) -> RelayNotifier:",
    "a sketch of the notifier ability (MyRelay is the reader's); the in-repo stores' "
    "offer_notifier, proved by the O-NOTIFIER part of the suite, are the whole thing",
)
PAGE.explain(
    "class TestMyStore(StoreContract):",
    "a template for the reader's store (`Offers(notifier=True)` needs one with a "
    "cross-process notifier); the same recipe runs on the minimal store above",
)
PAGE.explain(
    "def mystore_url(store_servers: StoreServers) -> str:",
    "a conftest for the reader's tests; the in-repo backends' conftests are these lines, "
    "run by their own tests",
)
CLI_FAILURE = PAGE.take("reproduce: mcp-tasks contract mypkg.testing:open_store")


def pytest_in(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``folder`` (no configuration of ours there), as a store author runs it."""
    command = ("-m", "pytest", "-p", "no:cacheprovider", *arguments)
    completed: subprocess.CompletedProcess[str] = THIRD_PARTY.run_python(
        folder, *command, timeout=300
    )
    return completed


def test_the_pages_store_passes_and_a_planted_bug_fails_as_the_page_shows(
    tmp_path: Path,
) -> None:
    (tmp_path / "minimal_store.py").write_text(MINIMAL_STORE.text, encoding="utf-8")
    (tmp_path / "test_dict_store.py").write_text(TEST_CLASS.text, encoding="utf-8")
    selected = ("test_dict_store.py", "-k", "test_terminal_tasks_are_final")
    passing = pytest_in(tmp_path, *selected)
    assert passing.returncode == 0, passing.stdout[-3000:] + passing.stderr

    (tmp_path / "minimal_store.py").write_text(
        THIRD_PARTY.planted(MINIMAL_STORE.text, THIRD_PARTY.FINISHED_MAY_CHANGE), encoding="utf-8"
    )
    failing = pytest_in(tmp_path, *selected)
    assert failing.returncode == 1, failing.stdout[-3000:] + failing.stderr
    output = iter(failing.stdout.splitlines())
    for line in BROKEN.text.splitlines():  # in order; "..." stands for the lines between
        if line != "...":
            assert any(line == printed for printed in output), f"{line!r} not in:\n{failing.stdout}"


def test_store_operations_is_the_protocols() -> None:
    namespace = run_program(OPERATIONS.text, "store_operations")
    assert namespace["STORE_OPERATIONS"] == protocol.STORE_OPERATIONS


def signature(function: ast.AsyncFunctionDef) -> str:
    """A method's signature as source, its body left out."""
    bare = ast.AsyncFunctionDef(
        name=function.name,
        args=function.args,
        body=[ast.Expr(ast.Constant(...))],
        decorator_list=[],
        returns=function.returns,
        type_params=[],
    )
    return ast.unparse(ast.fix_missing_locations(bare))


def test_each_operation_is_written_as_the_protocol_declares_it() -> None:
    source = ast.parse(textwrap.dedent(inspect.getsource(protocol.Store)))
    declared = {
        node.name: signature(node)
        for node in ast.walk(source)
        if isinstance(node, ast.AsyncFunctionDef)
    }
    for block in SIGNATURES:
        (function,) = ast.parse(block.text).body
        assert isinstance(function, ast.AsyncFunctionDef), block
        assert signature(function) == declared[function.name], block
    assert sorted(ast.parse(block.text).body[0].name for block in SIGNATURES) == sorted(  # type: ignore[attr-defined]
        name for name in protocol.STORE_OPERATIONS
    )


def test_the_entry_point_table_names_the_group_mcp_tasks_reads() -> None:
    table = tomllib.loads(STORES_TABLE.text)["project"]["entry-points"]
    assert list(table) == [ENTRY_POINT_GROUP], STORES_TABLE


#: my_store/store.py: the page's minimal store behind the constructor and the
#: ``drop_everything`` the page's backend calls; databases live in this process.
MY_STORE = """
from minimal_store import Database, DictTaskStore

DATABASES = {}


class MyTaskStore(DictTaskStore):
    def __init__(self, url, *, prefix, options):
        self.url, self.prefix = url, prefix
        super().__init__(DATABASES.setdefault((url, prefix), Database()), options)

    async def drop_everything(self):
        DATABASES.pop((self.url, self.prefix), None)
"""

#: What the check runs, in a process whose path holds my_store and its .dist-info.
OPEN_BY_URL = """
import os

import anyio

from mcp_tasks import NewTask, drop_namespace, namespaced_url, store_from_url
from mcp_tasks.stores.provisioning import NoTestServer, provisioner_for
from my_store import backend
from my_store.store import DATABASES, MyTaskStore


async def main():
    url = namespaced_url("mystore://host/db", "tenant")
    assert url == "mystore://host/db?prefix=tenant", url
    store = store_from_url(url)
    assert isinstance(store, MyTaskStore) and store.prefix == "tenant"
    await store.create(NewTask(task_id="t1", owner=None, ttl_ms=60_000))
    assert (await store.get("t1", None)).task_id == "t1"
    await store.close()
    assert ("mystore://host/db", "tenant") in DATABASES
    await drop_namespace(url)
    assert DATABASES == {}
    print("opened, namespaced and dropped")


def provisioned():
    assert provisioner_for("mystore") is backend
    os.environ.pop("MCP_TASKS_TEST_MYSTORE_URL", None)
    try:
        with backend.test_server():
            raise AssertionError("a server without MCP_TASKS_TEST_MYSTORE_URL")
    except NoTestServer as problem:
        reason = "set MCP_TASKS_TEST_MYSTORE_URL=mystore://host/db"
        assert str(problem) == f"No mystore server for the tests: {reason}", problem
    os.environ["MCP_TASKS_TEST_MYSTORE_URL"] = "mystore://tests/db"
    with backend.test_server() as url:
        assert backend.test_store_url(url) == "mystore://tests/db", url
    print("provisioned")


anyio.run(main)
provisioned()
"""


def test_the_backend_opens_its_scheme_through_its_entry_point(tmp_path: Path) -> None:
    package = tmp_path / "my_store"
    package.mkdir()
    (package / "__init__.py").write_text(BACKEND.text, encoding="utf-8")
    (package / "store.py").write_text(MY_STORE, encoding="utf-8")
    (tmp_path / "minimal_store.py").write_text(MINIMAL_STORE.text, encoding="utf-8")
    table = tomllib.loads(STORES_TABLE.text)["project"]["entry-points"][ENTRY_POINT_GROUP]
    metadata = tmp_path / "my_store-1.0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: my-store\nVersion: 1.0\n")
    entries = "".join(f"{name} = {target}\n" for name, target in table.items())
    (metadata / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entries}")
    (tmp_path / "check.py").write_text(OPEN_BY_URL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    completed = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout == "opened, namespaced and dropped\nprovisioned\n"


SEED = re.compile(r"--hypothesis-seed=\d+")
COMMAND = "mcp-tasks contract mypkg.testing:open_store -- -k test_terminal_tasks_are_final"


def test_the_cli_run_on_a_planted_store_ends_as_the_page_shows(tmp_path: Path) -> None:
    """The page's command on the page's store with a finished task made changeable:
    exit 1, and the output ends with the page's lines."""
    (tmp_path / "minimal_store.py").write_text(
        THIRD_PARTY.planted(MINIMAL_STORE.text, THIRD_PARTY.FINISHED_MAY_CHANGE), encoding="utf-8"
    )
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "testing.py").write_text(THIRD_PARTY.FACTORY_MODULE, encoding="utf-8")
    env = {k: v for k, v in environment().items() if not k.startswith(("PYTEST_", "PYTHON"))}
    completed = subprocess.run(
        argv(COMMAND),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 1, completed.stdout[-3000:] + completed.stderr
    prose = " ".join(PAGE.page.read_text(encoding="utf-8").split())
    assert f"`{COMMAND}`" in prose, "the page names the command this test runs"
    page = CLI_FAILURE.text.splitlines()
    tail = completed.stdout.splitlines()[-len(page) :]
    assert [SEED.sub("SEED", line) for line in tail] == [SEED.sub("SEED", line) for line in page], (
        "\n".join(tail)
    )

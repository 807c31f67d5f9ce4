"""Module boundaries: no module of mcp_tasks reaches into another's private names."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import mcp_tasks

PACKAGE_ROOT = Path(mcp_tasks.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _violations() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        module = _module_name(path)
        package = _package_of(module, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                continue
            source = node.module
            if not source.startswith("mcp_tasks"):
                continue
            source_package = source.rpartition(".")[0]
            # A private module is shared only with its own package's siblings.
            private_module = any(part.startswith("_") for part in source.split("."))
            if private_module and source_package != package:
                found.append(f"{module} imports private module {source}")
            # A subpackage's internals are its own: outsiders use what it exports.
            if source.startswith("mcp_tasks.engine.core") and package != "mcp_tasks.engine":
                found.append(f"{module} reaches into {source}; import from mcp_tasks.engine")
            found.extend(
                f"{module} imports private name {alias.name} from {source}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            )
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """Every cross-module import in mcp_tasks names a public name of a public module, and
    adapters take engine names from ``mcp_tasks.engine``, not from its ``core`` module."""
    assert _violations() == []


# Public by convention although spelled with an underscore: namedtuple's API, and the
# type of argparse's subparsers (the CLI's annotations; argparse has no public name for it).
UNDERSCORED_PUBLIC = frozenset({"_replace", "_asdict", "_fields", "_make", "_SubParsersAction"})
WORKSPACE_ROOT = PACKAGE_ROOT.parents[3]
#: Every distribution of the workspace (its members), each with a src layout.
DISTRIBUTIONS = sorted(
    member
    for pattern in tomllib.loads((WORKSPACE_ROOT / "pyproject.toml").read_text())["tool"]["uv"][
        "workspace"
    ]["members"]
    for member in WORKSPACE_ROOT.glob(pattern)
    if (member / "pyproject.toml").is_file()
)
SOURCE_ROOTS = [member / "src" for member in DISTRIBUTIONS]


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _package_of_file(path: Path) -> str:
    """The dotted package a source file belongs to (its folder under ``src``)."""
    root = next(root for root in SOURCE_ROOTS if path.is_relative_to(root))
    return ".".join(path.parent.relative_to(root).parts)


def _private_imports(path: Path, tree: ast.Module) -> list[str]:
    """Imports of a private module (``import x._y``, ``from x._y import z``, ``from x import
    _y``) that is not a sibling of the importing file (in its own package)."""
    package = _package_of_file(path)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sources = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the file's own package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            sources = [base] + [f"{base}.{a.name}" for a in node.names if _is_private(a.name)]
        else:
            continue
        for source in sources:
            if _is_private(source) and source.rpartition(".")[0] != package:
                found.append(f"{path.name}:{node.lineno} imports private module {source}")
                break
    return found


def _private_reads(path: Path) -> list[str]:
    """`obj._name` on anything but self/cls, getattr(obj, "_name"), and an import of another
    package's private module, in one file."""
    found: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if any(path.is_relative_to(root) for root in SOURCE_ROOTS):
        found.extend(_private_imports(path, tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
            owner = node.value
            if (
                name.startswith("_")
                and not name.startswith("__")
                and name not in UNDERSCORED_PUBLIC
                and not (isinstance(owner, ast.Name) and owner.id in {"self", "cls"})
            ):
                found.append(f"{path.name}:{node.lineno} reads .{name}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            found.append(f"{path.name}:{node.lineno} {node.func.id}(…, {node.args[1].value!r})")
    return found


#: The private reads we accept, each one documented in docs/architecture.md and made in one
#: place that fails loudly (not silently) when the name moves: (file, name).
KNOWN_PRIVATE_SEAMS = frozenset(
    {
        # FastMCP keeps the SDK Server whose middleware serves taskIds on listen only as
        # FastMCP._mcp_server ("Status notifications: the SDK seam", FastMCP part);
        # adapters.fastmcp.sdk_server_of raises a TypeError if it is not there.
        ("fastmcp.py", "_mcp_server"),
        # The SDK exports its span middleware from no public module; the fast path must
        # recognise it on a server's chain ("Status notifications: the SDK seam", the fast
        # path's import). The import fails at once if an SDK release moves it.
        ("fast_path.py", "mcp.server._otel"),
        # OpenTelemetry's SDK sets itself up from the OTEL_* variables through a configurator
        # it exports from no public module ("The SDK's configurator"); cli.otel imports it only when
        # the SDK is installed, and the import fails at once if a release moves it.
        ("otel.py", "opentelemetry.sdk._configuration"),
        # Whether a tracer provider is installed, asked by every span hook, read from the
        # API's global instead of its public look, which reads os.environ on every call
        # ("The tracer provider's global"); without that global, the public look.
        ("telemetry.py", "_TRACER_PROVIDER"),
        # A task call's arguments are checked as the SDK checks them ("Argument checks"):
        # an MCPServer's tools by name only through MCPServer._tool_manager (check_arguments_on
        # raises a TypeError at start-up if it is not there), a mounted FastMCP server's
        # tool only through its wrapper's _server and _original_name (the call fails).
        ("sdk.py", "_tool_manager"),
        ("fastmcp.py", "_server"),
        ("fastmcp.py", "_original_name"),
        # A watch's subscriptions/listen request runs in the client session's own task
        # group, as the SDK's own listen() does ("Pushes in the client"); without it the
        # watch polls, and tests/client/test_client_push.py (no tasks/get while pushed) fails.
        ("client.py", "_task_group"),
        # A listen stream's token is checked again with the server's verifier, which an
        # MCPServer keeps only as _token_verifier ("Listen streams and tokens");
        # adapters.sdk.token_verifier_of raises a TypeError if it is not there.
        ("sdk.py", "_token_verifier"),
    }
)


def _accepted(problem: str) -> bool:
    file, _, detail = problem.partition(" ")
    file = file.split(":", 1)[0]
    return any(
        file == seam_file
        and detail.endswith((f" .{name}", f", '{name}')", f" private module {name}"))
        for seam_file, name in KNOWN_PRIVATE_SEAMS
    )


def test_no_source_reads_a_private_attribute_of_another_object() -> None:
    """No module of any of our distributions reads another object's private attributes —
    in particular none of the MCP SDK's or FastMCP's (`_lowlevel_server`, `_extensions`):
    every seam we use is public, so SDK upgrades cannot break us silently. The one
    exceptions (:data:`KNOWN_PRIVATE_SEAMS`) are documented, isolated and fail loudly."""
    # The core, the SQL layer, four backends and the contract suite.
    assert len(SOURCE_ROOTS) == 7, SOURCE_ROOTS
    assert WORKSPACE_ROOT / "contract_tests" / "src" in SOURCE_ROOTS
    assert all(root.is_dir() for root in SOURCE_ROOTS), SOURCE_ROOTS
    found = [
        problem
        for root in SOURCE_ROOTS
        for path in root.rglob("*.py")
        for problem in _private_reads(path)
        if not _accepted(problem)
    ]
    assert found == []


def test_each_known_private_seam_is_read_exactly_once() -> None:
    """An accepted seam stays isolated: read in one place, and dropped from the list when
    it is no longer read."""
    found = [
        problem
        for root in SOURCE_ROOTS
        for path in root.rglob("*.py")
        for problem in _private_reads(path)
        if _accepted(problem)
    ]
    assert len(found) == len(KNOWN_PRIVATE_SEAMS), found


def test_the_private_attribute_check_finds_one() -> None:
    """The check above can fail: it finds private reads, by attribute and by getattr."""
    probe = PACKAGE_ROOT.parent / "_probe_private_reads.py"
    try:
        probe.write_text("x = app._lowlevel_server\ny = getattr(app, '_extensions', {})\n")
        assert _private_reads(probe) == [
            "_probe_private_reads.py:1 reads ._lowlevel_server",
            "_probe_private_reads.py:2 getattr(…, '_extensions')",
        ]
    finally:
        probe.unlink()


def test_the_private_import_check_finds_them() -> None:
    """The check sees every form of importing another package's private module, and lets a
    package's private module serve its own siblings."""
    probe = PACKAGE_ROOT / "cli" / "_probe_private_imports.py"
    try:
        probe.write_text(
            "import mcp.server._otel\n"
            "from mcp.server._otel import OpenTelemetryMiddleware\n"
            "from mcp.server import _otel\n"
            "from mcp_tasks.engine import _private\n"
            "from mcp_tasks.cli._errors import UsageError\n"
            "from . import _stores\n"
            "from ._errors import explain\n"
            "from .._private import thing\n"
            "def f():\n"
            "    import mcp.shared._otel\n"
        )
        assert _private_reads(probe) == [
            "_probe_private_imports.py:1 imports private module mcp.server._otel",
            "_probe_private_imports.py:2 imports private module mcp.server._otel",
            "_probe_private_imports.py:3 imports private module mcp.server._otel",
            "_probe_private_imports.py:4 imports private module mcp_tasks.engine._private",
            "_probe_private_imports.py:8 imports private module mcp_tasks._private",
            "_probe_private_imports.py:10 imports private module mcp.shared._otel",
        ]
    finally:
        probe.unlink()


#: A store written as a third party would write one: only against the published surface.
EXAMPLE_STORE = WORKSPACE_ROOT / "examples" / "mysql_store"
#: What it may import of ours: the distributions it depends on, and itself.
EXAMPLE_STORE_IMPORTS = frozenset(
    {"mcp_tasks", "mcp_tasks_sql", "mcp_tasks_contract", "mcp_tasks_mysql"}
)


def _third_party_problems(path: Path) -> list[str]:
    """In one file of a third party's store: imports of a module of ours it does not depend
    on, of a private module or name of ours, and reads of another object's private
    attributes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = _private_reads(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported = [(alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported = [(node.module, f"{node.module}.{alias.name}") for alias in node.names]
        else:
            continue
        for module, name in imported:
            if not module.startswith("mcp_tasks"):
                continue
            if module.split(".")[0] not in EXAMPLE_STORE_IMPORTS:
                found.append(f"{path.name}:{node.lineno} imports {module}, not a dependency")
            if _is_private(name):
                found.append(f"{path.name}:{node.lineno} imports private {name}")
    return found


def test_the_example_store_uses_only_our_public_surface() -> None:
    """examples/mysql_store (its package and its tests) imports only public modules and
    names of the distributions it depends on, and reads no private attribute of ours: the
    published surface is enough to write a store."""
    files = sorted(EXAMPLE_STORE.rglob("*.py"))
    assert len(files) >= 5, files
    assert [problem for path in files for problem in _third_party_problems(path)] == []

"""Every distribution installs from its wheel and works outside the clone.

Builds the wheel of every distribution (each ``packages/*`` directory, ``contract_tests`` and
any other workspace member, found afresh on every run), installs
``mcp-tasks[sqlite,postgres,redis]`` and ``mcp-tasks-contract`` into a fresh virtualenv with
``--find-links`` (our distributions from those wheels, third-party ones from the package
index), proves that every installed file of ours is byte for byte the one in our wheel, then
runs ``mcp-tasks demo`` and ``mcp-tasks contract memory://`` from a folder outside the clone.

Slow and networked, so only the ``packaging`` nox session runs it (the ``tests`` session and
a bare ``pytest`` do not collect ``tests/``). The building and installing is
:mod:`wheelhouse`'s: without uv or the package index it skips locally and fails when ``CI``
is set.
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from wheelhouse import (
    REPO,
    Installed,
    Wheel,
    bin_dir,
    canonical,
    clean_env,
    differences,
    find_uv,
    passed_every_test,
    run,
    wheel_venv,
)

# What the test installs, as a user would type it.
REQUIREMENTS = ("mcp-tasks[sqlite,postgres,redis]", "mcp-tasks-contract")
# Our distributions those requirements must bring (the rest of ours may or may not come).
EXPECTED_OURS = {
    "mcp-tasks",
    "mcp-tasks-sqlite",
    "mcp-tasks-postgres",
    "mcp-tasks-redis",
    "mcp-tasks-contract",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Our wheels, built, and a fresh virtualenv with REQUIREMENTS installed from them."""
    done = wheel_venv(tmp_path_factory.mktemp("wheel-install"), REQUIREMENTS)
    assert done.wheels.keys() >= EXPECTED_OURS
    return done


def test_our_distributions_are_installed_from_our_wheels(installed: Installed) -> None:
    """Each of our installed distributions is the built version, not editable, its files are
    byte for byte those of our wheel, and its packages import from the venv, not the clone."""
    listing = subprocess.run(
        [find_uv() or "uv", "pip", "list", "--python", str(installed.python), "--format", "json"],
        cwd=installed.outside,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    dists = {canonical(d["name"]): d for d in json.loads(listing.stdout)}
    assert [name for name, d in dists.items() if d.get("editable_project_location")] == []
    ours = {name: dists[name]["version"] for name in dists.keys() & installed.wheels.keys()}
    assert ours.keys() >= EXPECTED_OURS, sorted(dists)
    assert ours == {name: installed.wheels[name].version for name in ours}

    for name in sorted(ours):
        assert differences(installed.wheels[name], installed.site_packages) == [], name

    # Nothing in the venv points back at the clone (an editable .pth, a direct_url.json).
    site = installed.site_packages
    for path in [*site.glob("*.pth"), *site.glob("*.dist-info/direct_url.json")]:
        assert str(REPO) not in path.read_text(encoding="utf-8", errors="replace"), path

    modules = sorted(set().union(*(installed.wheels[name].top_level_packages() for name in ours)))
    probe = (
        "import importlib, json, sys\n"
        "print(json.dumps({'path': sys.path, 'files': "
        "{m: importlib.import_module(m).__file__ for m in sys.argv[1:]}}))"
    )
    where = json.loads(
        run(
            [str(installed.python), "-I", "-c", probe, *modules],
            cwd=installed.outside,
            env=clean_env(installed.venv),
            timeout=120,
        ).stdout
    )
    for module, file in where["files"].items():
        assert Path(file).resolve().is_relative_to(installed.site_packages.resolve()), module
    assert [p for p in where["path"] if p and Path(p).resolve().is_relative_to(REPO)] == []


def test_demo_runs_from_the_installed_wheels(installed: Installed) -> None:
    """`mcp-tasks demo` exits 0 with every step as expected, and leaves nothing behind."""
    done = run(
        [str(bin_dir(installed.venv) / "mcp-tasks"), "demo"],
        cwd=installed.outside,
        env=clean_env(installed.venv),
        timeout=300,
    )
    assert "demo finished: all steps as expected" in done.stdout, done.stdout
    assert list(installed.outside.iterdir()) == []


def test_contract_passes_on_memory_from_the_installed_wheels(
    installed: Installed, tmp_path: Path
) -> None:
    """`mcp-tasks contract memory://` runs the installed suite: exit 0, N > 0 tests, every one
    passed (none failed, errored or skipped), as both its JUnit report and its summary say;
    the tests of what memory:// does not offer (a clock, a notifier, a restart) are left
    out, and its last line says so."""
    report = tmp_path / "contract.xml"
    done = run(
        [
            str(bin_dir(installed.venv) / "mcp-tasks"),
            "contract",
            "memory://",
            "--",
            f"--junitxml={report}",
        ],
        cwd=installed.outside,
        env=clean_env(installed.venv),
        timeout=900,
    )
    passed = passed_every_test(report)
    summary = re.search(r"^(\d+) passed, 3 deselected in [\d.]+s", done.stdout, re.MULTILINE)
    assert summary is not None, done.stdout
    assert int(summary.group(1)) == passed
    assert done.stdout.splitlines()[-1].endswith("not offered: O-CLOCK, O-NOTIFIER, O-RESTART")
    assert list(installed.outside.iterdir()) == []


def test_the_wheel_check_catches_a_file_that_is_not_ours(tmp_path: Path) -> None:
    """The byte-for-byte check fails when an installed file differs from our wheel's
    (a same-named distribution from the index, a stale build) or is missing."""
    wheel_path = tmp_path / "demo_pkg-1.0-py3-none-any.whl"
    files = {"demo_pkg/__init__.py": b"X = 1\n", "demo_pkg-1.0.dist-info/METADATA": b""}
    with zipfile.ZipFile(wheel_path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr("demo_pkg-1.0.dist-info/RECORD", "rewritten by the installer\n")
    wheel = Wheel("demo-pkg", "1.0", wheel_path)
    site = tmp_path / "site"
    for name, content in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(content)
    assert differences(wheel, site) == []
    assert wheel.top_level_packages() == {"demo_pkg"}

    (site / "demo_pkg/__init__.py").write_bytes(b"X = 2\n")
    (site / "demo_pkg-1.0.dist-info/METADATA").unlink()
    assert differences(wheel, site) == [
        "demo_pkg-1.0.dist-info/METADATA: not installed",
        f"demo_pkg/__init__.py: differs from {wheel_path.name}",
    ]

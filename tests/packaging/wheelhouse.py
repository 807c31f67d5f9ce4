"""Building every distribution's wheel and installing from them into a fresh virtualenv,
outside the clone: what the packaging tests and the MariaDB example's session share.

Our distributions come only from the wheels just built (a ``--find-links`` folder holding
nothing else, pinned to the versions built), third-party ones from the package index.
Without uv or the package index it skips locally and fails when ``CI`` is set.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn
from xml.etree import ElementTree

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

REPO = Path(__file__).resolve().parents[2]

# Variables of the calling environment (e.g. `uv run`'s workspace venv) that would let the
# clone or another environment leak into the fresh one.
LEAKY_ENV = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")
LEAKY_ENV_PREFIXES = ("UV_PROJECT",)

DEFAULT_INDEX = "https://pypi.org/simple"


def unavailable(what: str) -> NoReturn:
    """A prerequisite is missing: skip locally, fail when CI is set."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(what)


def canonical(name: str) -> str:
    """PEP 503 normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_dirs() -> list[Path]:
    """Every distribution in the repository: each ``packages/*`` and ``contract_tests``
    directory with a pyproject.toml, and every uv workspace member besides."""
    found = {path.parent for path in REPO.glob("packages/*/pyproject.toml")}
    found |= {path.parent for path in REPO.glob("contract_tests/pyproject.toml")}
    workspace = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    for pattern in workspace["tool"]["uv"]["workspace"]["members"]:
        found |= {path.parent for path in REPO.glob(f"{pattern}/pyproject.toml")}
    return sorted(found)


def find_uv() -> str | None:
    """uv: the one running us (``$UV``, set by ``uv run``), the one on PATH, or the uv module's."""
    for candidate in (os.environ.get("UV"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError:
        return None
    return str(find_uv_bin())


def index_url() -> str:
    """The index uv resolves third-party distributions from (uv's own variables, else PyPI)."""
    for variable in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        value = os.environ.get(variable, "").split()
        if value:
            return value[0].rstrip("/")
    return DEFAULT_INDEX


def index_answers(url: str) -> str | None:
    """None when the index serves a project page, else why not."""
    try:
        with urllib.request.urlopen(f"{url}/pytest/", timeout=20) as response:
            response.read(1)
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    return None


def clean_env(venv: Path | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in LEAKY_ENV and not key.startswith(LEAKY_ENV_PREFIXES)
    }
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(bin_dir(venv)), env.get("PATH", "")])
        env["PYTHONNOUSERSITE"] = "1"
    return env


def bin_dir(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def run(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``command``; a non-zero exit fails the test with its whole output."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(command)} exited {done.returncode}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done


@dataclass(frozen=True)
class Wheel:
    name: str  # canonical
    version: str
    path: Path

    def members(self) -> dict[str, bytes]:
        """Every file of the wheel but its RECORD (which the installer rewrites)."""
        with zipfile.ZipFile(self.path) as archive:
            return {
                item.filename: archive.read(item)
                for item in archive.infolist()
                if not item.is_dir() and not item.filename.endswith(".dist-info/RECORD")
            }

    def top_level_packages(self) -> set[str]:
        return {
            name.split("/", 1)[0]
            for name in self.members()
            if "/" in name and not name.split("/", 1)[0].endswith((".dist-info", ".data"))
        }


def read_wheel(path: Path) -> Wheel:
    with zipfile.ZipFile(path) as archive:
        metadata_name = next(
            name for name in archive.namelist() if name.endswith(".dist-info/METADATA")
        )
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode("utf-8"))
    return Wheel(canonical(metadata["Name"]), metadata["Version"], path)


def differences(wheel: Wheel, site_packages: Path) -> list[str]:
    """How the installed files of ``wheel`` differ from the wheel's own (empty: identical)."""
    found = []
    for member, content in sorted(wheel.members().items()):
        installed = site_packages / member
        if not installed.is_file():
            found.append(f"{member}: not installed")
        elif installed.read_bytes() != content:
            found.append(f"{member}: differs from {wheel.path.name}")
    return found


@dataclass(frozen=True)
class Installed:
    venv: Path
    python: Path
    site_packages: Path
    wheels: dict[str, Wheel]  # canonical name → our wheel
    outside: Path  # an empty folder outside the repository: cwd of every command


def wheel_venv(root: Path, requirements: Sequence[str]) -> Installed:
    """Every distribution's wheel, built under ``root``, and a fresh virtualenv there with
    ``requirements`` installed (ours from those wheels, pinned to the versions built, the
    third-party ones from the package index). Skips (fails in CI) without uv or the index."""
    uv = find_uv()
    if uv is None:
        unavailable("uv is needed to build and install the wheels: pip install uv")
    index = index_url()
    problem = index_answers(index)
    if problem is not None:
        unavailable(f"the package index {index} does not answer: {problem}")

    assert not root.resolve().is_relative_to(REPO), "the scratch folder must be outside the clone"
    outside = root / "elsewhere"
    outside.mkdir()
    wheels_dir = root / "wheels"
    wheels_dir.mkdir()
    env = clean_env()

    # 1. Every distribution's wheel, each into its own folder so each build names its wheel.
    dirs = distribution_dirs()
    assert {REPO / "packages" / "mcp-tasks", REPO / "contract_tests"} <= set(dirs), dirs
    wheels: dict[str, Wheel] = {}
    outs = [root / "build" / str(number) for number in range(len(dirs))]

    def build(directory: Path, out: Path) -> None:
        command = [uv, "build", "--wheel", "--no-sources", "--out-dir", str(out), str(directory)]
        run(command, cwd=REPO, env=env, timeout=300)

    # The builds are independent: side by side (each mostly waits on its own build venv).
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(build, dirs, outs))
    for directory, out in zip(dirs, outs, strict=True):
        built = sorted(out.glob("*.whl"))
        assert len(built) == 1, f"{directory}: expected one wheel, got {built}"
        wheel = read_wheel(Path(shutil.move(built[0], wheels_dir / built[0].name)))
        assert wheel.name not in wheels, f"two distributions are named {wheel.name}"
        wheels[wheel.name] = wheel
    # The find-links folder holds our wheels and nothing else: whatever third-party
    # distribution gets installed can only have come from the index.
    assert sorted(p.name for p in wheels_dir.iterdir()) == sorted(
        w.path.name for w in wheels.values()
    )

    # 2. A fresh virtualenv on this interpreter; ours pinned to the versions just built.
    venv = root / "venv"
    run([uv, "venv", "--python", sys.executable, str(venv)], cwd=outside, env=env, timeout=120)
    python = bin_dir(venv) / ("python.exe" if os.name == "nt" else "python")
    constraints = root / "constraints.txt"
    constraints.write_text("".join(f"{w.name}=={w.version}\n" for w in wheels.values()))
    install = [uv, "pip", "install", "--python", str(python), "--find-links", str(wheels_dir)]
    install += ["--constraints", str(constraints), *requirements]
    run(install, cwd=outside, env=env, timeout=600)

    site_packages = Path(
        run(
            [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            cwd=outside,
            env=clean_env(venv),
            timeout=60,
        ).stdout.strip()
    )
    assert site_packages.resolve().is_relative_to(venv.resolve()), site_packages
    return Installed(venv, python, site_packages, wheels, outside)


def passed_every_test(report: Path) -> int:
    """The number of tests in a JUnit report, every one of which passed (none failed,
    errored or skipped)."""
    suites = ElementTree.parse(report).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    assert suite is not None
    counts = {key: int(suite.get(key, "-1")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] > 0, counts
    assert counts == {"tests": counts["tests"], "failures": 0, "errors": 0, "skipped": 0}
    return counts["tests"]

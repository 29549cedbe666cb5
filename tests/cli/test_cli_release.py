"""Releases a person can upgrade to (docs/RELEASING.md): the changelog's top entry is the version
`pyproject.toml` holds, and a wheel of a newer tree upgrades an install of an older one with real
pip, and with pipx.

The upgrade builds two wheels of this tree offline (`pip wheel --no-deps --no-build-isolation`),
differing only in `pyproject.toml`'s version, installs the older into a fresh venv and the newer
over it: `kirod --version` and `kiroctl --version` change, and one distribution is left. The
fresh venv takes kirod's runtime dependencies from this environment through a `.pth` line, as
tests/cli/test_cli_packaging.py does, so nothing is fetched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from kirod import __version__

ROOT = Path(__file__).parents[2]
SKIPPED = (
    ".git",
    ".venv",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    ".*_cache",
    ".cache",
    "node_modules",
    "bench",
    "tests",
)
OLDER = "0.1.0"  # what every tree before the first versioned release called itself


def project_version() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert isinstance(version, str)
    return version


def test_pyproject_holds_the_version_kirod_reports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"].get("dynamic", [])
    assert __version__ == project_version()
    assert re.fullmatch(r"0\.\d+\.\d+", __version__)  # docs/RELEASING.md §2


def test_the_changelogs_top_entry_is_the_version_in_pyproject() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    entries = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.MULTILINE)
    assert entries, "no `## [version] - date` entry"
    top, date = entries[0]
    assert top == project_version()
    assert date, "the top entry is a release: it carries its date"
    # Keep a Changelog: each version links to its release, and the top entry says what changed.
    for version, _ in entries:
        assert re.search(rf"^\[{re.escape(version)}\]: \S+$", changelog, re.MULTILINE), version
    body = changelog.split(f"## [{top}]", 1)[1].split("\n## [", 1)[0]
    assert re.search(r"^### (Added|Changed|Fixed)$", body, re.MULTILINE)
    assert "(issue " in body


def copy_tree(target: Path, version: str, *, dependencies: bool = True) -> Path:
    shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*SKIPPED))
    pyproject = target / "pyproject.toml"
    text, count = re.subn(
        r'^version = "[^"]+"$', f'version = "{version}"', pyproject.read_text(), flags=re.M
    )
    assert count == 1
    if not dependencies:
        text, count = re.subn(
            r"^dependencies = \[\n.*?^\]$", "dependencies = []", text, flags=re.M | re.S
        )
        assert count == 1
    pyproject.write_text(text)
    return target


def wheel_of(source: Path, into: Path) -> Path:
    """A wheel of `source` built by real pip, offline, with this environment's setuptools."""
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        into,
        source,
        cwd=source,
    )
    (wheel,) = into.glob("kirod-*.whl")
    return wheel


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-3000:])
    return result.stdout.strip()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Wheels of this tree as an older release and as itself."""
    root = tmp_path_factory.mktemp("release")
    older = wheel_of(copy_tree(root / "older", OLDER), root / "older-dist")
    newer = wheel_of(copy_tree(root / "newer", __version__), root / "newer-dist")
    assert older.name.startswith(f"kirod-{OLDER}-")
    assert newer.name.startswith(f"kirod-{__version__}-")
    return older, newer


def fresh_venv(where: Path, *, with_pip: bool = False) -> Path:
    """A venv whose kirod dependencies come from this environment (nothing is downloaded)."""
    args = [] if with_pip else ["--without-pip"]
    run(sys.executable, "-m", "venv", *args, where, cwd=where.parent)
    python = where / "bin" / "python"
    purelib = run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=where
    )
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def pip_install(python: Path, *args: str | Path) -> str:
    return run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-index",
        "--no-deps",
        "--disable-pip-version-check",
        *args,
        cwd=python.parent,
    )


def versions(venv: Path) -> tuple[str, str]:
    return (
        run(venv / "bin" / "kirod", "--version", cwd=venv),
        run(venv / "bin" / "kiroctl", "--version", cwd=venv),
    )


@pytest.mark.timeout(180)  # four pip runs and two wheels: ~25 s on an idle machine
def test_pip_install_upgrade_of_a_newer_wheel_replaces_an_older_install(
    wheels: tuple[Path, Path], tmp_path: Path
) -> None:
    older, newer = wheels
    venv = tmp_path / "venv"
    python = fresh_venv(venv)
    pip_install(python, older)
    assert versions(venv) == (f"kirod {OLDER}", f"kiroctl, version {OLDER}")
    # What every release did before this one: the same version again is "already installed".
    assert "already installed with the same version" in pip_install(python, "-U", older)

    pip_install(python, "-U", newer)
    assert versions(venv) == (f"kirod {__version__}", f"kiroctl, version {__version__}")
    purelib = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=venv)
    )
    assert [p.name for p in purelib.glob("kirod-*.dist-info")] == [f"kirod-{__version__}.dist-info"]
    # The installed package answers from its own metadata, not from a checkout.
    location = run(python, "-c", "import kirod; print(kirod.__file__)", cwd=venv)
    assert location.startswith(str(purelib))
    # The hand-read METADATA answers what the library does (bench/README.md: its gain).
    ours = run(python, "-c", "import kirod; print(kirod.__version__)", cwd=venv)
    library = run(
        python, "-c", "from importlib import metadata; print(metadata.version('kirod'))", cwd=venv
    )
    assert ours == library == __version__


@pytest.mark.timeout(180)
def test_pipx_install_force_of_a_newer_wheel_replaces_an_older_install(tmp_path: Path) -> None:
    """pipx (the README's way to install), which comes with the test extras, over two wheels
    whose dependency list is emptied: pipx reads the metadata of every dependency of the app it
    installs, and a test downloads none. What an upgrade changes, kirod and its metadata, is the
    same; kirod's own version is read in pipx's venv."""
    pipx = Path(sys.executable).parent / "pipx"
    if not pipx.exists():
        pytest.skip("pipx is not installed here: `make test` installs it with the test extras")
    older = wheel_of(copy_tree(tmp_path / "older", OLDER, dependencies=False), tmp_path / "o")
    newer = wheel_of(copy_tree(tmp_path / "newer", __version__, dependencies=False), tmp_path / "n")
    env = {
        **os.environ,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Its shared pip from the interpreter's ensurepip, offline, instead of an upgrade from
        # the index (pipx wants pip >= 26.1 there).
        "PIPX_DISABLE_SHARED_LIBS_AUTO_UPGRADE": "1",
    }
    pip_args = "--no-deps --no-index"
    for wheel, version in ((older, OLDER), (newer, __version__)):
        run(pipx, "install", "--force", "--pip-args", pip_args, wheel, cwd=tmp_path, env=env)
        listed = run(pipx, "list", "--short", cwd=tmp_path, env=env)
        assert listed.splitlines() == [f"kirod {version}"]
        python = tmp_path / "pipx" / "venvs" / "kirod" / "bin" / "python"
        read = run(python, "-c", "import kirod; print(kirod.__version__)", cwd=tmp_path)
        assert read == version

"""The sdist builds, a wheel builds from it, and that wheel works in a fresh virtual environment.

Offline and quick: setuptools' own backend without build isolation, a venv without pip, and the
runtime dependencies taken from the running environment through a `.pth` line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

from kirod import __version__

ROOT = Path(__file__).parents[2]
SKIPPED = (".git", ".venv", "*.egg-info", "build", "dist", "__pycache__", ".*_cache", "bench")


def build(kind: str, source: Path) -> Path:
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}('dist'))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return source / "dist" / result.stdout.strip().splitlines()[-1]


def run(*command: str | Path, cwd: Path) -> str:
    """`cwd` matters: `python -c` imports from it first."""
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()


def test_sdist_and_wheel_install_into_a_fresh_venv(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SKIPPED))
    sdist = build("sdist", source)
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        archive.extractall(tmp_path / "unpacked", filter="data")
    for shipped in (
        "man/kirod.8",
        "man/kiroctl.1",
        "man/kirod.toml.5",
        "contrib/kirod.service",
        "contrib/dev.kirod.plist",
        "contrib/kirod.toml",
        "packaging/arch/PKGBUILD",
        "kirod/py.typed",
    ):
        assert shipped in names
    wheel = build("wheel", tmp_path / "unpacked" / f"kirod-{__version__}")

    venv = tmp_path / "venv"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=elsewhere)
    python = venv / "bin" / "python"
    purelib = run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=elsewhere
    )
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--no-deps",
        wheel,
        cwd=elsewhere,
    )

    assert run(venv / "bin" / "kirod", "--version", cwd=elsewhere) == f"kirod {__version__}"
    assert run(venv / "bin" / "kiroctl", "--version", cwd=elsewhere) == (
        f"kiroctl, version {__version__}"
    )
    location = run(python, "-c", "import kirod; print(kirod.__file__)", cwd=elsewhere)
    assert location.startswith(purelib)

"""The release check: the sdist builds, a wheel builds from it, and the wheel works in a new venv.

Offline and quick: setuptools' own backend without build isolation, a venv without pip, and the
runtime dependencies taken from the running environment through a `.pth` line — with the test
extras (the SDKs, pytest, orjson, …) blocked in that venv, so it behaves like `pipx install .`
without them. In it: `kirod --version`, `kiroctl --help`, the demo's `--check` (the fake Kiro and
a kirod, one request, stop), the man pages where `man` finds them, and each page rendered, and the
example config and service files. The wheel the README's `pipx install .` builds from a clone holds
the same files as the one built from the sdist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
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
)
MAN_PAGES = {
    "kiroctl": "man1/kiroctl.1",
    "kirod": "man8/kirod.8",
    "kirod.toml": "man5/kirod.toml.5",
}
TEST_ONLY = (
    "pytest",
    "_pytest",
    "hypothesis",
    "anthropic",
    "openai",
    "orjson",
    "mypy",
    "setuptools",
)
"""The test extras a `pipx install .` lacks; importing any of them fails in the fresh venv."""
CONTRIB_DOCS = ("kirod.toml", "kirod.service", "dev.kirod.plist")
"""What a packager installs from `contrib/`: in the wheel's `share/doc/kirod/` too."""


def build(kind: str, source: Path, *, warnings: str = "default") -> Path:
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}('dist'))"
    result = subprocess.run(
        [sys.executable, "-W", warnings, "-c", code],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return source / "dist" / result.stdout.strip().splitlines()[-1]


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """`cwd` matters: `python -c` imports from it first."""
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


def test_the_editable_install_raises_no_setuptools_warning(tmp_path: Path) -> None:
    """`pip install -e .` shows the backend's Python warnings; `-W error` makes any one fail."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SKIPPED))
    build("editable", source, warnings="error")


def test_the_metadata_names_the_license_urls_classifiers_and_keywords() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    assert "Homepage" in project["urls"]
    assert "Typing :: Typed" in project["classifiers"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639
    assert "kiro" in project["keywords"]


def test_sdist_and_wheel_install_into_a_fresh_venv(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SKIPPED))
    sdist = build("sdist", source)
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        archive.extractall(tmp_path / "unpacked", filter="data")
    for shipped in (
        "LICENSE",
        "man/kirod.8",
        "man/kiroctl.1",
        "man/kirod.toml.5",
        "contrib/kirod.service",
        "contrib/dev.kirod.plist",
        "contrib/kirod.toml",
        "packaging/arch/PKGBUILD",
        "kirod/py.typed",
        "kirod/testing/demo.py",
        *readme_pictures(),  # the README, unpacked from the sdist, shows them
        *(f"docs/guide/{page.name}" for page in (ROOT / "docs" / "guide").glob("*.md")),
    ):
        assert shipped in names
    wheel = build("wheel", tmp_path / "unpacked" / f"kirod-{__version__}")
    with zipfile.ZipFile(wheel) as archive:
        files = set(archive.namelist())
        metadata = archive.read(f"kirod-{__version__}.dist-info/METADATA").decode()
    assert f"kirod-{__version__}.dist-info/licenses/LICENSE" in files
    for page in MAN_PAGES.values():
        assert f"kirod-{__version__}.data/data/share/man/{page}" in files
    for name in CONTRIB_DOCS:
        assert f"kirod-{__version__}.data/data/share/doc/kirod/{name}" in files
    # `pipx install .` in a clone builds the wheel from the tree, not from the sdist.
    with zipfile.ZipFile(build("wheel", source)) as archive:
        assert set(archive.namelist()) == files
    for field in ("License-Expression: MIT", "Project-URL: Homepage", "Classifier: ", "Keywords: "):
        assert field in metadata

    venv = tmp_path / "venv"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=elsewhere)
    python = venv / "bin" / "python"
    purelib = run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=elsewhere
    )
    # The runtime dependencies from this environment; its test extras made unimportable.
    (Path(purelib) / "dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"]
        + f"\nimport sys; sys.modules.update(dict.fromkeys({TEST_ONLY!r}))\n"
    )
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        wheel,
        cwd=elsewhere,
    )
    blocked = run(
        python, "-c", "import importlib.util as u; print(u.find_spec('openai'))", cwd=elsewhere
    )
    assert blocked == "None"

    assert run(venv / "bin" / "kirod", "--version", cwd=elsewhere) == f"kirod {__version__}"
    assert run(venv / "bin" / "kiroctl", "--version", cwd=elsewhere) == (
        f"kiroctl, version {__version__}"
    )
    assert "Usage: kiroctl" in run(venv / "bin" / "kiroctl", "--help", cwd=elsewhere)
    location = run(python, "-c", "import kirod; print(kirod.__file__)", cwd=elsewhere)
    assert location.startswith(purelib)

    checked = run(venv / "bin" / "kirod", "demo", "--check", cwd=elsewhere)
    assert "ok" in checked

    man_dir = venv / "share" / "man"
    for page in MAN_PAGES.values():
        assert (man_dir / page).read_text() == (ROOT / "man" / Path(page).name).read_text()
    check_man_pages(man_dir, cwd=elsewhere)
    for name in CONTRIB_DOCS:
        installed = venv / "share" / "doc" / "kirod" / name
        assert installed.read_text() == (ROOT / "contrib" / name).read_text()


def readme_pictures() -> list[str]:
    """The files the README's images name: paths in the checkout (no host serves them yet)."""
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    assert pictures
    return pictures


def check_man_pages(man_dir: Path, *, cwd: Path) -> None:
    """`man NAME` finds each installed page (a venv's or pipx's `share/man`), and each renders."""
    env = {**os.environ, "MANPATH": str(man_dir), "MANPAGER": "cat", "PAGER": "cat"}
    env.pop("MANOPT", None)
    if shutil.which("man"):
        for name, page in MAN_PAGES.items():
            section = page.split("/")[0].removeprefix("man")
            assert run("man", "-w", section, name, cwd=cwd, env=env) == str(man_dir / page)
            shown = run("man", "-l", man_dir / page, cwd=cwd, env={**env, "MANWIDTH": "80"})
            assert name.upper() in shown.splitlines()[0].upper()
        return
    renderer = shutil.which("mandoc") or shutil.which("groff")
    if renderer is None:
        print("man, mandoc and groff are not installed: the man pages were not rendered")
        return
    for page in MAN_PAGES.values():
        argv = (
            [renderer, "-Tlint", man_dir / page]
            if renderer.endswith("mandoc")
            else [renderer, "-man", "-Tutf8", "-ww", "-z", man_dir / page]
        )
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, (page, result.stdout, result.stderr)
        assert not result.stderr.strip(), (page, result.stderr)


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_the_source_man_pages_render_without_warnings(tmp_path: Path) -> None:
    for page in MAN_PAGES.values():
        source = ROOT / "man" / Path(page).name
        result = subprocess.run(
            ["man", "--warnings", "-l", str(source)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80"},
        )
        assert result.returncode == 0, (page, result.stderr)
        assert not result.stderr.strip(), (page, result.stderr)

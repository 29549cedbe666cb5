"""The tests are one package: every folder with Python in it has an `__init__.py`, so pytest
imports each file as `tests.<folder>.<module>` with the repository root on `sys.path`; nothing
edits `sys.path`; a helper is imported by its package path, never from a test module (what several
folders share lives in tests/support); each test file's name is its own; and the scripts the
Makefile runs from here run as modules from the root."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SOURCES = sorted(TESTS.rglob("*.py"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


TEST_MODULES = {module_name(path) for path in SOURCES if path.name.startswith("test_")}
HELPER_NAMES = {path.stem for path in SOURCES} - {"__init__", "conftest"}


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) for each absolute import; `from a import b` gives `a` and `a.b`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_every_folder_with_python_is_a_package() -> None:
    folders = {path.parent for path in SOURCES}
    assert TESTS in folders
    missing = [
        str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").exists()
    ]
    assert not missing


def test_nothing_reads_or_edits_sys_path() -> None:
    found = [
        where(path, node.lineno)
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]
    assert not found


def test_helpers_are_imported_by_their_package_path_and_never_from_a_test() -> None:
    bare, from_tests = [], []
    for path in SOURCES:
        for line, target in imported(ast.parse(path.read_text(), str(path))):
            if target.partition(".")[0] in HELPER_NAMES:
                bare.append(f"{where(path, line)} {target}")
            if target in TEST_MODULES:
                from_tests.append(f"{where(path, line)} {target}")
    assert not bare, "import helpers as tests.<folder>.<module>"
    assert not from_tests, "move what tests share into a helper module or a fixture"


def test_each_test_file_has_a_name_of_its_own() -> None:
    names = Counter(path.name for path in SOURCES if path.name.startswith("test_"))
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "tests.clients.install", "--help"],
        ["-m", "tests.clients.capture", "--help"],
        ["-m", "tests.clients.latest", "--dry-run"],
    ],
    ids=["install", "capture", "latest"],
)
def test_the_client_scripts_run_as_modules_from_the_root(argv: list[str]) -> None:
    """As the Makefile runs them (`make clients`, `make clients-latest`); none installs or
    captures anything with these arguments."""
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout

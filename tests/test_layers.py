"""The layering docs/ARCHITECTURE.md describes, checked on every module's imports: lower never
imports higher, and no modules import each other in a circle."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kirod"
# What the control plane reports: a stdlib-only leaf like kirod.errors, so every layer that
# builds a report (storage, the account layer) may use it, and so may kiroctl.
REPORT_TYPES = "kirod.report_types"
BASE = {
    "kirod.errors",
    "kirod.paths",
    "kirod.config",
    "kirod.log",
    "kirod.tasks",
    REPORT_TYPES,
}
# The control API's prefix and error envelope, shared by its server and kiroctl's client.
WIRE = "kirod.localapi.wire"
STDLIB_ONLY = (REPORT_TYPES, WIRE)
SERVER_LIBRARIES = ("aiohttp", "botocore", "aiosqlite")
# The root package and its version, which any layer may import. They are names, not prefixes: as
# an allowed prefix, "kirod" would let every module import anything.
ROOT_PACKAGE = {"kirod", "kirod.__version__"}

# What each layer may import from kirod (prefixes), besides itself.
ALLOWED: dict[str, set[str]] = {
    "kirod.canonical": BASE,
    "kirod.protocols": BASE | {"kirod.canonical"},
    "kirod.upstream": BASE | {"kirod.canonical"},
    "kirod.storage": BASE,
    "kirod.accounts": BASE | {"kirod.canonical", "kirod.upstream", "kirod.storage"},
    "kirod.http": BASE
    | {"kirod.canonical", "kirod.protocols", "kirod.upstream", "kirod.storage", "kirod.accounts"},
    "kirod.localapi": BASE | {"kirod.accounts", "kirod.localapi"},
    # The console is a second front end of the control API: its handlers, its vocabulary.
    "kirod.http.console": BASE | {"kirod.accounts", "kirod.localapi", "kirod.http.console"},
    "kirod.daemon": BASE
    | {
        "kirod.canonical",
        "kirod.protocols",
        "kirod.upstream",
        "kirod.storage",
        "kirod.accounts",
        "kirod.http",
        "kirod.localapi",
    },
    REPORT_TYPES: set(),
    WIRE: set(),
    "kirod.localapi.client": BASE | {WIRE},
    "kirod.cli": {
        "kirod.errors",
        "kirod.paths",
        "kirod.localapi.client",
        REPORT_TYPES,
    },
}
PURE = ("kirod.canonical", "kirod.protocols")
# `kirod demo` runs the shipped fake Kiro: the one place outside kirod.testing that reaches into
# it, lazily, inside that subcommand.
TEST_SUPPORT_USERS = {"kirod.daemon.main": ("kirod.testing.demo",)}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def layer_of(name: str) -> str | None:
    matches = [layer for layer in ALLOWED if name == layer or name.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


MODULES = sorted(
    (module_name(path), path)
    for path in PACKAGE.rglob("*.py")
    if "testing" not in path.relative_to(PACKAGE).parts
)


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_module_respects_its_layer(name: str, path: Path) -> None:
    own = layer_of(name)
    for target in imports(path):
        if not target.startswith("kirod"):
            if name.startswith(PURE) or name.startswith("kirod.cli"):
                assert not target.startswith(SERVER_LIBRARIES), f"{name} imports {target}"
            continue
        if target.startswith("kirod.testing"):
            assert target.startswith(TEST_SUPPORT_USERS.get(name, ("-",))), (
                f"{name} imports test support {target}"
            )
            continue
        if own is None or target == own or target in ROOT_PACKAGE or target.startswith(own + "."):
            continue
        allowed = ALLOWED[own]
        assert any(target == ok or target.startswith(ok + ".") for ok in allowed), (
            f"{name} ({own}) must not import {target}"
        )


def test_codecs_never_import_each_other() -> None:
    codecs = {"anthropic", "responses", "chat", "ollama"}
    for name, path in MODULES:
        parts = name.split(".")
        if len(parts) < 3 or parts[1] != "protocols" or parts[2] not in codecs:
            continue
        for target in imports(path):
            for other in codecs - {parts[2]}:
                assert not target.startswith(f"kirod.protocols.{other}"), (name, target)


EXCHANGE_INTERNALS = (
    "kirod.upstream.payload",
    "kirod.upstream.conversation",
    "kirod.upstream.reasoning",
    "kirod.upstream.frames",
    "kirod.upstream.translate",
)


def test_accounts_reach_kiros_chat_only_through_the_exchange() -> None:
    for name, path in MODULES:
        if not name.startswith("kirod.accounts"):
            continue
        for target in imports(path):
            assert not target.startswith(EXCHANGE_INTERNALS), (name, target)


def test_report_types_and_the_control_wire_import_only_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for name, path in MODULES:
        if not name.startswith(STDLIB_ONLY):
            continue
        for target in imports(path):
            if target.startswith(REPORT_TYPES + ".") and name.startswith(REPORT_TYPES):
                continue
            assert target.partition(".")[0] in allowed, f"{name} imports {target}"


def test_the_report_types_live_only_in_kirod_report_types() -> None:
    assert not (PACKAGE / "localapi" / "schema.py").exists()
    for tree in ("kirod", "tests", "bench", "contrib"):
        for path in (ROOT / tree).rglob("*.py"):
            for target in imports(path):
                assert not target.startswith("kirod.localapi.schema"), f"{path} imports {target}"


def test_the_store_and_the_account_layer_never_import_the_control_api() -> None:
    for name, path in MODULES:
        if not name.startswith(("kirod.storage", "kirod.accounts")):
            continue
        for target in imports(path):
            assert not target.startswith("kirod.localapi"), f"{name} imports {target}"


ALL_MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def dependencies(path: Path) -> set[str]:
    """The modules of kirod that importing `path` imports: every import statement outside a
    function, `if TYPE_CHECKING:` ones included. `from package import module` depends on that
    module, not on the package's `__init__` (Python runs it first, but it is already importing
    when a module of its own asks for it)."""
    found: set[str] = set()

    def module_of(name: str) -> None:
        while name not in ALL_MODULES and "." in name:
            name = name.rpartition(".")[0]
        if name in ALL_MODULES:
            found.add(name)

    pending: list[ast.AST] = list(ast.parse(path.read_text(), str(path)).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue  # runs when called, not when imported
        if isinstance(node, ast.Import):
            for alias in node.names:
                module_of(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                module_of(f"{node.module}.{alias.name}")
        pending.extend(ast.iter_child_nodes(node))
    return found - {module_name(path)}


def test_no_import_cycles() -> None:
    """Modules depend one way: no module imports, through others, a module that imports it.

    Type-only imports count, as they do for the layers: a circle that only the type checker
    follows is still two concepts that each need the other. Imports inside functions do not:
    they run when called, once every module has loaded."""
    graph = {name: dependencies(path) for name, path in ALL_MODULES.items()}
    cycles: list[list[str]] = []
    done: set[str] = set()
    trail: list[str] = []

    def visit(name: str) -> None:
        trail.append(name)
        for target in sorted(graph[name]):
            if target in trail:
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in done:
                visit(target)
        trail.pop()
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name)
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(cycle) for cycle in cycles)

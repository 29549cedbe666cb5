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
    "kirod.drift",
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

# What each layer may import from kirod (prefixes), besides itself: docs/ARCHITECTURE.md's
# layers, lowest first. The pool (accounts) never imports the pipeline (dispatch) or the control
# services; upstream never imports the credential lifecycle that sits on top of it.
DOMAIN = {"kirod.canonical", "kirod.upstream", "kirod.storage"}
ALLOWED: dict[str, set[str]] = {
    "kirod.canonical": BASE,
    "kirod.protocols": BASE | {"kirod.canonical"},
    "kirod.upstream": BASE | {"kirod.canonical"},
    "kirod.storage": BASE,
    "kirod.credentials": BASE | {"kirod.canonical", "kirod.upstream"},
    # What keys and accounts may spend: an in-memory ledger over the storage's spend table,
    # read by the pool's callers, never calling them.
    "kirod.budgets": BASE | {"kirod.canonical", "kirod.storage"},
    "kirod.accounts": BASE | DOMAIN | {"kirod.credentials"},
    "kirod.dispatch": BASE | DOMAIN | {"kirod.accounts", "kirod.budgets", "kirod.extension"},
    "kirod.control": BASE | DOMAIN | {"kirod.credentials", "kirod.accounts", "kirod.budgets"},
    # The public contract of extensions: the base class, its option specs, the canonical types.
    "kirod.extension": BASE | {"kirod.canonical"},
    "kirod.http": BASE
    | DOMAIN
    | {"kirod.protocols", "kirod.accounts", "kirod.budgets", "kirod.dispatch", "kirod.control"},
    # The model directory is the one pool service the front ends read directly: read-only, and
    # the same list `/v1/models` shows.
    # So are budgets' limits, a value the control routes parse.
    "kirod.localapi": BASE
    | {
        "kirod.dispatch",
        "kirod.control",
        "kirod.accounts.model_directory",
        "kirod.budgets.limits",
        "kirod.localapi",
    },
    # The console is a second front end of the control API: its handlers, its vocabulary.
    "kirod.http.console": BASE
    | {"kirod.dispatch", "kirod.control", "kirod.localapi", "kirod.http.console"},
    "kirod.daemon": BASE
    | DOMAIN
    | {
        "kirod.protocols",
        "kirod.credentials",
        "kirod.accounts",
        "kirod.budgets",
        "kirod.dispatch",
        "kirod.control",
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
    # `kiroctl db` works on the database file itself when no kirod runs (and `recover` only
    # then): the storage layer's offline tools, imported only inside those commands.
    "kirod.cli.commands.db": {
        "kirod.errors",
        "kirod.paths",
        "kirod.localapi.client",
        REPORT_TYPES,
        "kirod.cli",
        "kirod.storage.offline",
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
    codecs = {"anthropic", "responses", "chat", "ollama", "gemini"}
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


def test_the_pool_and_the_pipeline_reach_kiros_chat_only_through_the_exchange() -> None:
    for name, path in MODULES:
        if not name.startswith(("kirod.accounts", "kirod.dispatch")):
            continue
        for target in imports(path):
            assert not target.startswith(EXCHANGE_INTERNALS), (name, target)


def test_published_extensions_import_only_the_public_extension_module() -> None:
    """`contrib/extensions` is what an author copies: it imports kirod only through
    `kirod.extension`, so the runner behind it stays free to move."""
    sources = sorted((ROOT / "contrib" / "extensions").rglob("*.py"))
    assert sources
    for path in sources:
        for target in imports(path):
            if target.startswith("kirod"):
                assert target.startswith("kirod.extension"), f"{path.name} imports {target}"
        assert "kirod.dispatch" not in path.read_text()


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


def test_the_domain_never_imports_the_control_api() -> None:
    for name, path in MODULES:
        if not name.startswith(DOMAIN_PACKAGES):
            continue
        for target in imports(path):
            assert not target.startswith("kirod.localapi"), f"{name} imports {target}"


DOMAIN_PACKAGES = (
    "kirod.storage",
    "kirod.credentials",
    "kirod.accounts",
    "kirod.dispatch",
    "kirod.control",
)


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

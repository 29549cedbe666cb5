"""The layering of DESIGN.md §2, checked on every module's imports: lower never imports higher,
and no modules import each other in a circle."""

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

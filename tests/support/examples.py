"""The example extensions shipped in contrib/extensions, from the source tree as an installer
would find them, without putting that folder on `sys.path`: their package, `kirod_examples`, is
loaded from its path and registered under its own name, so an entry point that names
`kirod_examples.redactor:Redactor` loads the same module."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["CONTRIB", "Redactor", "Watermark"]

CONTRIB = Path(__file__).resolve().parents[2] / "contrib" / "extensions"
PACKAGE = "kirod_examples"


def _package() -> ModuleType:
    """`kirod_examples`, imported once from contrib/extensions."""
    known = sys.modules.get(PACKAGE)
    if known is not None:
        return known
    folder = CONTRIB / PACKAGE
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None
    assert spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return package


_package()
Redactor = importlib.import_module(f"{PACKAGE}.redactor").Redactor
Watermark = importlib.import_module(f"{PACKAGE}.watermark").Watermark

"""kirod: a local gateway that serves Kiro accounts as standard LLM APIs.

`__version__` is the installed distribution's version, read at run time: `pyproject.toml` is its
one source (docs/RELEASING.md), so a wheel built from a newer tree reports the newer version.
"""

from __future__ import annotations

import re
from pathlib import Path

_VERSION_LINE = re.compile(r'^version\s*=\s*"([^"]+)"\s*$', re.MULTILINE)


def _checkout_version(package: Path) -> str | None:
    """In a source checkout (editable or on PYTHONPATH), the version its `pyproject.toml` holds
    now: an editable install's metadata is a copy made when it was installed, and goes stale."""
    try:
        project = (package.parent / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    if 'name = "kirod"' not in project:
        return None
    found = _VERSION_LINE.search(project)
    return found.group(1) if found else None


def _installed_version(package: Path) -> str | None:
    """A wheel's version from the `kirod-<version>.dist-info` installed beside the package.

    What `importlib.metadata.version("kirod")` answers, without importing it: that costs kiroctl
    some 35 ms and the `email` package at every start. Two dist-infos (an interrupted upgrade)
    are left to importlib.metadata, which picks as pip does.
    """
    infos = list(package.parent.glob("kirod-*.dist-info"))
    if len(infos) == 1:
        try:
            with (infos[0] / "METADATA").open(encoding="utf-8") as headers:
                for line in headers:
                    if line.startswith("Version:"):
                        return line.removeprefix("Version:").strip()
                    if not line.strip():  # the headers end at the first empty line
                        break
        except OSError:
            pass
    from importlib import metadata

    try:
        return metadata.version("kirod")
    except metadata.PackageNotFoundError:
        return None


def _version() -> str:
    package = Path(__file__).resolve().parent
    # "0+unknown": a PEP 440 version lower than any release, for a copy with neither source.
    return _checkout_version(package) or _installed_version(package) or "0+unknown"


__version__ = _version()

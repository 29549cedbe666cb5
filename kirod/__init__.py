"""kirod: a local gateway that serves Kiro accounts as standard LLM APIs.

`__version__` is the installed distribution's version, read at run time: `pyproject.toml` is its
one source (docs/RELEASING.md), so a wheel built from a newer tree reports the newer version.
Plain `os` and string work: kiroctl imports this first, and its start-up counts.
"""

from __future__ import annotations

import os


def _checkout_version(root: str) -> str | None:
    """In a source checkout (editable or on PYTHONPATH), the version its `pyproject.toml` holds
    now: an editable install's metadata is a copy made when it was installed, and goes stale."""
    try:
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as project:
            lines = project.read().splitlines()
    except OSError:
        return None
    if 'name = "kirod"' not in lines:
        return None
    for line in lines:
        name, _, value = line.partition("=")
        if name.strip() == "version" and value.strip().startswith('"'):
            return value.strip().strip('"')
    return None


def _installed_version(root: str) -> str | None:
    """A wheel's version from the `kirod-<version>.dist-info` installed beside the package.

    What `importlib.metadata.version("kirod")` answers, without importing it: that costs kiroctl
    some 35 ms and the `email` package at every start. Two dist-infos (an interrupted upgrade)
    are left to importlib.metadata, which picks as pip does.
    """
    try:
        infos = [n for n in os.listdir(root) if n.startswith("kirod-") and n.endswith(".dist-info")]
    except OSError:
        infos = []
    if len(infos) == 1:
        try:
            with open(os.path.join(root, infos[0], "METADATA"), encoding="utf-8") as headers:
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
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    # "0+unknown": a PEP 440 version lower than any release, for a copy with neither source.
    return _checkout_version(root) or _installed_version(root) or "0+unknown"


__version__ = _version()

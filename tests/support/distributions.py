"""Installed distributions as an installer leaves them, so a daemon finds extensions through
entry points without installing anything into the venv (not a test module)."""

from __future__ import annotations

from pathlib import Path


def dist_info(site: Path, name: str, version: str, points: dict[str, str]) -> None:
    """What an installer would write for a distribution: enough for `entry_points()`."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in points.items())
    (info / "entry_points.txt").write_text(f"[kirod.extensions]\n{lines}")

"""The README keeps its two-command quick start and documents every option."""

from __future__ import annotations

import re
from pathlib import Path

from kirod.config import OPTIONS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_quick_start_is_the_two_make_commands() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make run", "make test"]


def test_every_option_is_in_the_configuration_table() -> None:
    table = README.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    missing = [option.name for option in OPTIONS if f"| `{option.name}` |" not in table]
    assert not missing, f"README configuration table lacks {missing}"


def test_the_first_screen_goes_from_install_to_claude_code_and_codex() -> None:
    first = README.split("\n## ", 2)[1]  # the first section after the introduction
    assert first.startswith("In a minute")
    lines = [line for line in first.splitlines()[1:] if line.strip() and not line.startswith("```")]
    assert len(lines) <= 15
    text = "\n".join(lines)
    for step in ("kiroctl accounts login", "ANTHROPIC_BASE_URL", "codex"):
        assert step in text, step
    # Until kirod is on PyPI the install builds the clone (tests/cli/test_cli_packaging.py builds
    # that wheel); `pipx install kirod` would find nothing.
    install = first.split("```sh\n", 1)[1].splitlines()[0]
    assert install.startswith("pipx install . ")
    assert "clone" in install
    assert set(re.findall(r"^pipx install \S+", README, re.MULTILINE)) == {"pipx install ."}


def test_every_picture_is_a_file_of_the_checkout() -> None:
    """Relative paths: they show in the checkout, on a forge and from the unpacked sdist (which
    ships them: tests/cli/test_cli_packaging.py), not on PyPI until a public host serves them."""
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README)
    assert pictures
    root = Path(__file__).resolve().parent.parent
    for picture in pictures:
        assert (root / picture).is_file(), picture

"""The README is a front door: the two-command quick start, the first screen from install to
Claude Code and Codex, one table of clients whose settings are those of the guide, and links
onward. What the guide's pages show is checked by tests/test_guide.py, the README included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CLIENTS_PAGE = ROOT / "docs" / "guide" / "client-settings.md"
NOT_TRIED = "*Not tried against kirod*"
"""How a client section whose settings come from the client's own docs says so."""
FROM_THEIR_DOCS = ("Crush", "goose", "Qwen Code", "OpenHands", "OpenClaw", "LobeChat")
"""The clients issue 49 asks settings for from their own documentation."""


def section(text: str, heading: str) -> str:
    """The body of `text`'s `## heading` section, up to the next section."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def client_sections() -> dict[str, str]:
    """Each `## client` section of the guide's clients page by its heading."""
    parts = re.split(r"^## ", CLIENTS_PAGE.read_text(), flags=re.MULTILINE)[1:]
    sections = {part.split("\n", 1)[0]: part for part in parts}
    del sections["Before you start"]
    return sections


def client_rows() -> dict[str, list[str]]:
    """The README's client table: its cells by the client section each row links to."""
    rows: dict[str, list[str]] = {}
    for line in section(README, "Clients").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        link = re.fullmatch(r"\[[^\]]+\]\(docs/guide/client-settings\.md#([\w-]+)\)", cells[-1])
        if line.startswith("| ") and link:
            rows[link[1]] = cells
    return rows


def slug(heading: str) -> str:
    """The anchor a forge gives `heading` (GitHub's rule: lower case, punctuation dropped)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_quick_start_is_the_two_make_commands() -> None:
    block = re.search(r"```sh\n(.*?)```", section(README, "Quick start"), re.S)
    assert block is not None
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make run", "make test"]


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


def test_the_readme_stays_a_front_door() -> None:
    """At most about 250 lines (issue 49); the rest is in the guide, which it links."""
    assert len(README.splitlines()) <= 250
    assert "](docs/guide/README.md)" in README


def test_the_client_table_has_a_row_for_each_client_of_the_guide() -> None:
    assert set(client_rows()) == {slug(heading) for heading in client_sections()}


@pytest.mark.parametrize("heading", sorted(client_sections()))
def test_each_setting_of_the_client_table_is_in_the_clients_guide_section(heading: str) -> None:
    """The 2 to 4 settings a row shows are written as the guide's section writes them, whose
    blocks the client tests run (tests/clients/guide_snippets.py)."""
    cells = client_rows()[slug(heading)]
    settings = re.findall(r"`([^`]+)`", cells[2])
    assert 2 <= len(settings) <= 4, cells
    text = client_sections()[heading]
    for setting in settings:
        assert setting in text, f"{heading}: {setting!r} is not in its guide section"


def test_clients_not_tried_against_kirod_are_marked_in_the_table_and_the_guide() -> None:
    marked_rows = {name for name, cells in client_rows().items() if cells[0].endswith(" *")}
    marked_sections = {
        slug(heading) for heading, text in client_sections().items() if NOT_TRIED in text
    }
    assert marked_rows == marked_sections
    assert {slug(client) for client in FROM_THEIR_DOCS} <= marked_sections
    assert "Clients marked * are not\ntried against kirod" in section(README, "Clients")


def test_every_picture_is_a_file_of_the_checkout() -> None:
    """Relative paths: they show in the checkout, on a forge and from the unpacked sdist (which
    ships them: tests/cli/test_cli_packaging.py), not on PyPI until a public host serves them."""
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README)
    assert pictures
    for picture in pictures:
        assert (ROOT / picture).is_file(), picture

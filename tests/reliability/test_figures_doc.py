"""docs/RELIABILITY.md's figures section is exactly what the generator makes of the figures it
embeds: a hand edit, or a generator changed without regenerating, fails here."""

from __future__ import annotations

import os
import re

import pytest

from tests.reliability.figures import DOC, SECTIONS, embedded, render, section_of

pytestmark = pytest.mark.skipif(
    os.environ.get("KIROD_RELIABILITY_REPORT") == "1",
    reason="this run rewrites the document at its end",
)

# What must never reach a committed document: paths of the machine that ran the suite, and
# anything shaped like an issued secret or key.
MACHINE_SPECIFIC = re.compile(
    r"(/tmp/|/home/|/work/|/Users/|/private/var/|\bksk_|\baoa[A-Za-z0-9])"
)


def test_the_figures_section_is_what_the_generator_renders() -> None:
    section = section_of(DOC.read_text())
    data = embedded(section)
    assert set(data) == set(SECTIONS)
    assert render(data) == section


def test_the_figures_cover_every_section_and_leak_nothing() -> None:
    section = section_of(DOC.read_text())
    data = embedded(section)
    assert all(data[name] for name in SECTIONS), [name for name in SECTIONS if not data[name]]
    assert not MACHINE_SPECIFIC.search(section)

"""Every `§` reference names a page the repository holds, and a section that page has.

Code cites the facts it rests on as `docs/<FILE>.md §n`, so a clone can follow every reference.
Scanned: kirod/, tests/, bench/, contrib/, docs/, man/, packaging/, pyproject.toml, Makefile and
README.md. The rules:

- each `§` opens a citation `docs/<FILE>.md §n`; the numbers after it in a list or range
  (`§n, §m`, `§n and §m`, `§n to §m`, `§n-§m`) cite the same page. A public standard's section
  (`RFC 9112 §9.3.1.1`) is not the repository's to check. Inside a docs page a bare `§n` is that
  page's own section;
- the page exists under docs/ and has a heading numbered n (`## 3. Layers`, `### 3.2 …`);
- no line names a document the repository does not hold: the `../shared` notes, or `DESIGN.md`,
  `kiro-protocol.md`, `capabilities.md`, `clients.md` other than as a `docs/` page.

Recorded traffic (`*.json` captures) is data, not prose, and is not scanned.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCANNED_DIRS = ("kirod", "tests", "bench", "contrib", "docs", "man", "packaging")
SCANNED_FILES = ("pyproject.toml", "Makefile", "README.md")
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})
THIS_FILE = Path(__file__).resolve()

_NUMBER = r"\d+(?:\.\d+)*"
CITATION = re.compile(
    rf"docs/(?P<page>[\w.-]+\.md)\s+§(?P<first>{_NUMBER})"
    rf"(?P<more>(?:(?:\s*,\s*|\s+and\s+|\s+to\s+|\s*[-\u2013]\s*)§{_NUMBER})*)"
)
STANDARD = re.compile(rf"\bRFC\s?\d+\s+§{_NUMBER}")
OWN_SECTION = re.compile(rf"§(?P<number>{_NUMBER})")
HEADING = re.compile(rf"^#{{1,6}}\s+(?P<number>{_NUMBER})\.?\s")
OUTSIDE = re.compile(
    r"\.\./shared\b|/work/shared\b|(?<!docs/)\b(?:DESIGN|kiro-protocol|capabilities|clients)\.md\b",
    re.IGNORECASE,
)


@functools.cache
def sections(page: Path) -> frozenset[str]:
    """The numbers of `page`'s headings, outside fenced code."""
    numbers: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            numbers.add(match["number"])
    return frozenset(numbers)


def _cited(page: str, numbers: list[str]) -> Iterator[str]:
    """What is wrong with citing `numbers` of docs/`page`."""
    path = DOCS / page
    if not path.is_file():
        yield f"docs/{page} does not exist"
        return
    for number in numbers:
        if number not in sections(path):
            yield f"docs/{page} has no section {number}"


def problems(text: str, own_page: str | None = None) -> Iterator[tuple[int, str]]:
    """(offset, what is wrong) for each bad reference in `text`; `own_page`: the docs page it is.

    Whitespace between a page and its sections may be a line break, as in a wrapped docstring.
    """
    for match in OUTSIDE.finditer(text):
        yield match.start(), f"names a document outside the repository: {match[0]!r}"
    covered: set[int] = set()
    for match in CITATION.finditer(text):
        covered.update(range(match.start(), match.end()))
        numbers = [match["first"], *OWN_SECTION.findall(match["more"])]
        yield from ((match.start(), problem) for problem in _cited(match["page"], numbers))
    for match in STANDARD.finditer(text):
        covered.update(range(match.start(), match.end()))
    for index, char in enumerate(text):
        if char != "§" or index in covered:
            continue
        own = OWN_SECTION.match(text, index)
        if own_page is not None and own is not None:
            yield from ((index, problem) for problem in _cited(own_page, [own["number"]]))
        else:
            yield index, f"a § that names no docs/ page: {text[index : index + 24]!r}"


def line_problems(line: str, own_page: str | None = None) -> list[str]:
    return [problem for _, problem in problems(line, own_page)]


def scanned_files() -> Iterator[Path]:
    for name in SCANNED_FILES:
        yield ROOT / name
    for top in SCANNED_DIRS:
        for folder, subfolders, files in os.walk(ROOT / top):
            subfolders[:] = sorted(
                d for d in subfolders if not d.startswith(".") and d not in SKIPPED_DIRS
            )
            for name in sorted(files):
                if not name.startswith(".") and not name.endswith(".json"):
                    yield Path(folder) / name


def file_problems(path: Path) -> Iterator[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # images and other binary files
        return
    own_page = path.name if path.parent == DOCS and path.suffix == ".md" else None
    for offset, problem in problems(text, own_page):
        yield f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}: {problem}"


def test_every_reference_resolves() -> None:
    problems = [p for path in scanned_files() if path != THIS_FILE for p in file_problems(path)]
    assert not problems, "\n".join(problems)


def test_the_scan_sees_the_citations() -> None:
    """The scan is not vacuous: the code's citations are found, of every page they cite."""
    cited: dict[str, int] = {}
    for path in scanned_files():
        if path.suffix == ".py" and path != THIS_FILE:
            for match in CITATION.finditer(path.read_text(encoding="utf-8")):
                cited[match["page"]] = cited.get(match["page"], 0) + 1
    assert set(cited) >= {"ARCHITECTURE.md", "KIRO-PROTOCOL.md", "UPSTREAM.md", "CLIENTS.md"}
    assert sum(cited.values()) > 100


@pytest.mark.parametrize(
    "line",
    [
        "(docs/KIRO-PROTOCOL.md §2.3)",
        "`docs/UPSTREAM.md §5.2`",
        "Codex compacts (docs/CLIENTS.md §3.3)",
        "docs/KIRO-PROTOCOL.md §5.2, §5.3; external IdP: docs/UPSTREAM.md §5.5",
        "repairs what breaks (docs/KIRO-PROTOCOL.md §3.3 to §3.5, §4.2)",
        "docs/KIRO-PROTOCOL.md §2.3's rules",
        "docs/ARCHITECTURE.md §4.6 and §4.7",
        "aiohttp resends it (RFC 9112 §9.3.1.1)",
        "a wrapped docstring (docs/KIRO-PROTOCOL.md\n§1.3) and (RFC 9112\n  §9.3.1.1)",
        "no section sign at all",
    ],
)
def test_a_good_reference_passes(line: str) -> None:
    assert line_problems(line) == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("Images as Kiro limits them (capabilities §9).", "a § that names no docs/ page"),
        ("(kiro-protocol §2.4a)", "a § that names no docs/ page"),
        ("(§2.4b)", "a § that names no docs/ page"),
        ("every task owned (DESIGN.md principle 6)", "outside the repository: 'DESIGN.md'"),
        ("see kiro-protocol.md", "outside the repository: 'kiro-protocol.md'"),
        ("Codex's compaction (clients.md §2.3c)", "outside the repository: 'clients.md'"),
        ("the notes in ../shared/anchors.md", "outside the repository: '../shared'"),
        ("(/work/shared/DESIGN.md §2)", "outside the repository: '/work/shared'"),
        ("(/work/shared/DESIGN.md §2)", "outside the repository: 'DESIGN.md'"),
        ("as CLIENTS.md says", "outside the repository: 'CLIENTS.md'"),
        ("(docs/NOWHERE.md §1)", "docs/NOWHERE.md does not exist"),
        ("(docs/KIRO-PROTOCOL.md §99.9)", "docs/KIRO-PROTOCOL.md has no section 99.9"),
        ("(docs/KIRO-PROTOCOL.md §2.3, §77)", "docs/KIRO-PROTOCOL.md has no section 77"),
        ("(docs/UPSTREAM.md §1 to §42.1)", "docs/UPSTREAM.md has no section 42.1"),
        ("docs/UPSTREAM.md §", "a § that names no docs/ page"),
    ],
)
def test_a_bad_reference_fails(line: str, problem: str) -> None:
    assert any(problem in found for found in line_problems(line)), line_problems(line)


def test_inside_a_docs_page_a_bare_section_is_its_own() -> None:
    assert line_problems("as §2.3 says", own_page="KIRO-PROTOCOL.md") == []
    assert line_problems("as §2.3 says") != []
    assert line_problems("as §12.1 says", own_page="CLIENTS.md") == [
        "docs/CLIENTS.md has no section 12.1"
    ]

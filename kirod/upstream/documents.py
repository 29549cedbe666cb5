"""Document names as Kiro accepts them (docs/KIRO-PROTOCOL.md §2.3, rule 21).

Kiro's `documents[].name` is the file name without its final extension: 1 to 200 characters of
letters, digits, space, hyphen, underscore, parentheses and square brackets, with no leading,
trailing or double space. Clients send file names (`Q3 report.pdf`), titles of any characters, or
nothing; `kiro_names` turns each into an accepted name, unique within the message.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Final

from kirod.canonical.request import DocumentBlock

MAX_NAME_CHARS: Final = 200
_EXTENSION: Final = re.compile(r"\.[A-Za-z0-9]{1,5}$")
_NOT_ALLOWED: Final = re.compile(r"[^A-Za-z0-9 \-_()\[\]]+")
_SPACES: Final = re.compile(r" {2,}")


def kiro_name(name: str) -> str:
    """`name` within Kiro's rule, or "" when nothing of it is left (a name of other scripts).

    Accents are dropped (`résumé` → `resume`), every other character Kiro refuses becomes a
    space, and runs of spaces collapse to one.
    """
    name = _EXTENSION.sub("", name.strip())
    ascii_name = "".join(
        c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)
    )
    cleaned = _SPACES.sub(" ", _NOT_ALLOWED.sub(" ", ascii_name)).strip()
    return cleaned[:MAX_NAME_CHARS].rstrip()


def kiro_names(documents: Sequence[DocumentBlock]) -> list[str]:
    """One accepted name for each of one message's `documents`, no two alike: `document-<n>`
    (its place in the message) for a document without a usable name, ` (2)`, ` (3)` … after a
    name already taken."""
    names: list[str] = []
    taken: set[str] = set()
    for position, document in enumerate(documents, 1):
        base = kiro_name(document.name) or f"document-{position}"
        name, copy = base, 1
        while name.lower() in taken:
            copy += 1
            suffix = f" ({copy})"
            name = base[: MAX_NAME_CHARS - len(suffix)].rstrip() + suffix
        taken.add(name.lower())
        names.append(name)
    return names

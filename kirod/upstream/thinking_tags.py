"""Prompt-tag thinking (docs/KIRO-PROTOCOL.md §2.5): a leading `<thinking>…</thinking>` block split
off the response text.

Only a tag at the very start (after whitespace) opens the block; a close tag counts only when the
rest of its line is blank, so a quoted `</thinking>` inside the reasoning stays reasoning. At most
a partial tag is held back, and an unclosed block at the end of the stream is closed as thinking.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

ThinkingMode: TypeAlias = Literal["none", "tags", "native"]
"""How thinking was requested. Only "tags" changes translation: it parses `<thinking>` text.
`reasoningContentEvent` frames are translated whatever the mode."""

THINKING: Final = "thinking"
TEXT: Final = "text"
Piece: TypeAlias = tuple[Literal["thinking", "text"], str]
_OPEN_TAG: Final = "<thinking>"
_CLOSE_TAG: Final = "</thinking>"


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


def _is_bare_close_tag(text: str) -> bool:
    """Whether `text` is a close tag and blank space: at a boundary, that closes the block."""
    return text.startswith(_CLOSE_TAG) and not text[len(_CLOSE_TAG) :].strip()


class ThinkingTagSplitter:
    """Splits a leading `<thinking>…</thinking>` block off the response text
    (docs/KIRO-PROTOCOL.md §2.5)."""

    def __init__(self) -> None:
        self._state: Literal["start", "thinking", "after", "text"] = "start"
        self._held = ""
        self._thinking_begun = False

    def feed(self, text: str) -> list[Piece]:
        pieces: list[Piece] = []
        self._held += text
        while self._held:
            if self._state == "start":
                self._drain_start(pieces)
                if self._state == "start":
                    break
            elif self._state == "thinking":
                if not self._drain_thinking(pieces):
                    break
            elif self._state == "after":
                # The blank line between the closing tag and the answer is framing.
                answer = self._held.lstrip("\r\n")
                self._held = ""
                if answer:
                    self._state = "text"
                    pieces.append((TEXT, answer))
            else:
                pieces.append((TEXT, self._held))
                self._held = ""
        return pieces

    def boundary(self) -> list[Piece]:
        """Settle what is held because other content (or the end) interrupts the text."""
        pieces: list[Piece] = []
        if self._state == "start":
            pieces.append((TEXT, self._held))
        elif self._state == "thinking" and not _is_bare_close_tag(self._held):
            self._thinking(pieces, self._held)
        self._held = ""
        self._state = "text"
        return [piece for piece in pieces if piece[1]]

    def _drain_start(self, pieces: list[Piece]) -> None:
        body = self._held.lstrip()
        if len(body) < len(self._held):
            # Leading whitespace passes as text; the translator opens no block for it alone.
            pieces.append((TEXT, self._held[: len(self._held) - len(body)]))
            self._held = body
        if body.startswith(_OPEN_TAG):
            self._held = body[len(_OPEN_TAG) :]
            self._state = "thinking"
        elif body and not _OPEN_TAG.startswith(body):
            self._state = "text"

    def _drain_thinking(self, pieces: list[Piece]) -> bool:
        """Emit thinking up to a close tag; return whether the state changed."""
        while True:
            at = self._held.find(_CLOSE_TAG)
            if at < 0:
                keep = partial_suffix(self._held, _CLOSE_TAG)
                self._thinking(pieces, self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                return False
            self._thinking(pieces, self._held[:at])
            after = self._held[at + len(_CLOSE_TAG) :]
            rest = after.lstrip(" \t")
            if rest in ("", "\r"):
                self._held = self._held[at:]  # undecided until the line goes on
                return False
            if rest.startswith(("\n", "\r\n")):
                self._held = rest
                self._state = "after"
                return True
            self._thinking(pieces, _CLOSE_TAG)  # a tag mentioned mid-line is content
            self._held = after

    def _thinking(self, pieces: list[Piece], text: str) -> None:
        if not self._thinking_begun:
            text = text.lstrip("\r\n")  # the line break after the opening tag is framing
        if text:
            self._thinking_begun = True
            pieces.append((THINKING, text))

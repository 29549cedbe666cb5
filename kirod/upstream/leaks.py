"""Leaked tool calls: the model sometimes writes `[Called X with args: {…}]` as text.

When X is a declared tool the text becomes a real tool call; otherwise it stays text. From
`[Called ` to the `]` after the balanced JSON the text is held back, up to `LEAK_MAX_CHARS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kirod.upstream.thinking_tags import partial_suffix

LEAK_MAX_CHARS: Final = 64 * 1024
_LEAK_PREFIX: Final = "[Called "
_LEAK_SEPARATOR: Final = " with args: "
_LEAK_NAME = re.compile(r"[\w.:-]*")
_LEAK_NAME_MAX: Final = 128
_JSON_STRUCTURE = re.compile(r'[{}"]')
_JSON_STRING_STOP = re.compile(r'["\\]')


@dataclass(frozen=True, slots=True)
class LeakedCall:
    name: str  # the client's name for the tool
    arguments: str  # the JSON object exactly as the model wrote it


class LeakRescuer:
    """Turns `[Called X with args: {…}]` text into tool calls when X is a declared tool."""

    def __init__(self, resolve: Callable[[str], str | None]) -> None:
        self._resolve = resolve  # leaked name → the client's tool name, or None if undeclared
        self._held = ""
        self._reset_candidate()

    def feed(self, text: str) -> list[str | LeakedCall]:
        self._held += text
        return self._drain(final=False)

    def flush(self) -> list[str | LeakedCall]:
        return self._drain(final=True)

    def _reset_candidate(self) -> None:
        self._name: str | None = None
        self._json_start = 0
        self._scan = 0  # next index of `_held` the JSON scanner looks at
        self._depth = 0
        self._in_string = False
        self._json_end = 0

    def _drain(self, *, final: bool) -> list[str | LeakedCall]:
        out: list[str | LeakedCall] = []
        while self._held:
            at = self._held.find(_LEAK_PREFIX)
            if at < 0:
                keep = 0 if final else partial_suffix(self._held, _LEAK_PREFIX)
                out.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                break
            if at:
                out.append(self._held[:at])
                self._held = self._held[at:]
                self._reset_candidate()
            verdict = self._match()
            if isinstance(verdict, LeakedCall):
                out.append(verdict)
                self._held = self._held[self._json_end + 1 :]
                self._reset_candidate()
            elif verdict and not final and len(self._held) <= LEAK_MAX_CHARS:
                break  # still a possible leak: wait for more text
            else:
                out.append(_LEAK_PREFIX)
                self._held = self._held[len(_LEAK_PREFIX) :]
                self._reset_candidate()
        return [item for item in out if item]

    def _match(self) -> LeakedCall | bool:
        """The leaked call `_held` starts with, or whether one may still complete."""
        if self._name is None:
            rest = self._held[len(_LEAK_PREFIX) :]
            name_end = _LEAK_NAME.match(rest)
            assert name_end is not None  # the pattern matches the empty string
            name, tail = rest[: name_end.end()], rest[name_end.end() :]
            if len(name) > _LEAK_NAME_MAX:
                return False
            if not (name and tail.startswith(_LEAK_SEPARATOR)):
                return not tail or bool(name and _LEAK_SEPARATOR.startswith(tail))
            resolved = self._resolve(name)
            if resolved is None:
                return False
            self._name = resolved
            self._json_start = self._scan = len(_LEAK_PREFIX) + len(name) + len(_LEAK_SEPARATOR)
        if not self._json_end and not self._scan_json():
            return self._json_start == len(self._held) or self._held[self._json_start] == "{"
        if self._json_end == len(self._held):
            return True
        if self._held[self._json_end] != "]":
            return False
        arguments = self._held[self._json_start : self._json_end]
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return False
        return LeakedCall(self._name, arguments) if isinstance(parsed, dict) else False

    def _scan_json(self) -> bool:
        """Advance the scan for the end of the JSON object; true once it is found."""
        held = self._held
        if self._scan == self._json_start and not held.startswith("{", self._scan):
            return False
        while self._scan < len(held):
            if self._in_string:
                stop = _JSON_STRING_STOP.search(held, self._scan)
                if stop is None:
                    self._scan = len(held)
                elif stop.group() == "\\":
                    self._scan = stop.end() + 1  # skip the escaped character, even if unseen
                else:
                    self._scan = stop.end()
                    self._in_string = False
                continue
            found = _JSON_STRUCTURE.search(held, self._scan)
            if found is None:
                self._scan = len(held)
                break
            self._scan = found.end()
            if found.group() == '"':
                self._in_string = True
            elif found.group() == "{":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    self._json_end = self._scan
                    return True
        return False

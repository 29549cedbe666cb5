"""A freeform tool's raw input, read as it streams out of its JSON arguments.

Kiro calls a freeform (`custom`) tool as a JSON tool with one string parameter, and streams the
arguments in fragments: `{"inp`, `ut": "const r = aw`, `ait tools.exec\\n…`. Clients want the raw
string itself, streamed (`response.custom_tool_call_input.delta`). `InputReader` decodes the
string value of that parameter incrementally: each `feed` returns the newly decoded text, never a
half escape sequence, in time linear in the input.
"""

from __future__ import annotations

import json
import re
from typing import Final

_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


class InputReader:
    """Incremental decoder of the string value of `key` in a streamed JSON object."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._start = re.compile(r'"' + re.escape(key) + r'"\s*:\s*"')
        self._parts: list[str] = []
        self._pending = ""  # not yet decoded: the text before the value, or a cut escape
        self._in_value = False
        self._closed = False

    def feed(self, fragment: str) -> str:
        self._parts.append(fragment)
        if self._closed:
            return ""
        self._pending += fragment
        if not self._in_value:
            # Only the few characters before the value are searched again: `{"input": "`.
            match = self._start.search(self._pending)
            if match is None:
                return ""
            self._in_value = True
            self._pending = self._pending[match.end() :]
        return self._decode()

    def _decode(self) -> str:
        out: list[str] = []
        text, i, end = self._pending, 0, len(self._pending)
        while i < end:
            char = text[i]
            if char == '"':
                self._closed = True
                i = end
                break
            if char != "\\":
                stop = _next_special(text, i)
                out.append(text[i:stop])
                i = stop
                continue
            if i + 1 >= end:
                break  # the escape is cut: wait for the rest
            code = text[i + 1]
            if code != "u":
                out.append(_ESCAPES.get(code, code))
                i += 2
                continue
            unit, width = _unicode_escape(text, i)
            if unit is None:
                break
            out.append(unit)
            i += width
        self._pending = text[i:]
        return "".join(out)

    def value(self) -> str:
        """The whole value once the arguments are complete; the raw text if they are not JSON
        holding a string under the key (the model did not follow the one-parameter schema)."""
        raw = "".join(self._parts)
        try:
            document = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(document, dict) and isinstance(found := document.get(self._key), str):
            return found
        return raw


def _next_special(text: str, start: int) -> int:
    quote, backslash = text.find('"', start), text.find("\\", start)
    candidates = [i for i in (quote, backslash) if i >= 0]
    return min(candidates) if candidates else len(text)


def _unicode_escape(text: str, i: int) -> tuple[str | None, int]:
    """`\\uXXXX` at `i` (with its low surrogate when it is a high one); None while cut."""
    digits = text[i + 2 : i + 6]
    if len(digits) < 4:
        return None, 0
    try:
        unit = int(digits, 16)
    except ValueError:
        return "\ufffd", 6
    if 0xD800 <= unit < 0xDC00:
        low = text[i + 6 : i + 12]
        if len(low) < 6:
            return None, 0
        if low.startswith("\\u"):
            try:
                second = int(low[2:], 16)
            except ValueError:
                return "\ufffd", 6
            if 0xDC00 <= second < 0xE000:
                return chr(0x10000 + ((unit - 0xD800) << 10) + (second - 0xDC00)), 12
        return "\ufffd", 6
    return chr(unit), 6

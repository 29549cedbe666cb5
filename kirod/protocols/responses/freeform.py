"""Freeform (`custom`) tools: how each is declared to Kiro, and its raw input as it streams.

Freeform tools take a raw string, not JSON arguments. Kiro only knows JSON tools, so each is
declared upstream as a tool with one string parameter, `input`, whose description is the client's
own: the tool's description, then its input format (for a grammar, its syntax and definition, as
the client declared them). The model's call comes back as a `custom_tool_call` item carrying that
string; a `custom_tool_call` / `custom_tool_call_output` pair in the input goes upstream as that
tool's use and result (`calls.py`).

Kiro streams the arguments in fragments: `{"inp`, `ut": "const r = aw`, `ait tools.exec\\n…`.
Clients want the raw string itself, streamed (`response.custom_tool_call_input.delta`).
`InputReader` decodes the string value of that parameter incrementally: each `feed` returns the
newly decoded text, never a half escape sequence, in time linear in the input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import ToolSpec
from kirod.protocols.fields import invalid, string_field

CUSTOM_INPUT: Final = "input"  # the one parameter a freeform tool is declared with upstream

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


def custom_tool(tool: Mapping[str, Any], path: str) -> tuple[ToolSpec, dict[str, Any]]:
    """A freeform tool as Kiro can call it: one string parameter carrying the raw input."""
    name = string_field(tool, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    description = string_field(tool, "description", path) or ""
    fmt = tool.get("format")
    if fmt is not None and not isinstance(fmt, Mapping):
        raise invalid(f"{path}.format", "must be an object", "invalid_type")
    schema = {
        "type": "object",
        "properties": {
            CUSTOM_INPUT: {"type": "string", "description": _input_format(fmt, f"{path}.format")}
        },
        "required": [CUSTOM_INPUT],
    }
    echo: dict[str, Any] = {"type": "custom", "name": name, "description": description}
    if fmt is not None:
        echo["format"] = dict(fmt)
    return ToolSpec(name, description, schema), echo


def _input_format(fmt: Mapping[str, Any] | None, path: str) -> str:
    """The client's declared input format, as the description of the one string parameter."""
    if fmt is None or fmt.get("type") in (None, "text"):
        return "The raw input text."
    if fmt.get("type") != "grammar":
        raise invalid(f"{path}.type", "must be 'text' or 'grammar'")
    syntax = string_field(fmt, "syntax", path) or "lark"
    definition = string_field(fmt, "definition", path, required=True)
    return f"The raw input text, in this {syntax} grammar:\n{definition}"


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

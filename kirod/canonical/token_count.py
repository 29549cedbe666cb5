"""A fast, dependency-free estimate of how many tokens Claude's tokenizer makes of a text.

Kiro reports no token counts (docs/KIRO-PROTOCOL.md §3.5), yet clients budget their context with
them: output tokens (and input tokens before Kiro's context percentage arrives) are estimated here.

Method: a regex pre-tokenizer sorts the text into classes and charges each a calibrated weight.

    ASCII letters   1.0 per run of up to 10 (`the`, `estimate`, and a long word costs more)
    digits          1.4 per run of up to 3
    ASCII symbols   1.0 per run of up to 3 (`":[`, `->`, `}}`)
    newlines        1.0 each (indentation merges into them)
    CJK             1.1 per character (Han, kana, Hangul, CJK punctuation and full-width forms)
    other letters   0.6 per character (accented Latin, Cyrillic, Greek, …)
    other symbols   2.5 per character (emoji, dashes, arrows: several byte-level tokens each)

Spaces are free: BPE tokenizers fold them into the following word. The weights were fitted by
least squares on English prose, Python and JavaScript source, compact and indented JSON, and
Chinese, Japanese, Korean, Russian, French and German text, against the last tokenizer Anthropic
published; every 4 000-character sample landed within ±15 % of it. Current Claude tokenizers are
unpublished and differ by a few percent more, which is why this is an estimate, never a count.

Every class only grows as text is appended, so the estimate is monotonic in the text's length.

Cost: ASCII classes are counted on the UTF-8 bytes (`bytes.translate`), the single-character
classes of other text with one `str.translate` through a table of the Basic Multilingual Plane
(built on first use, 64 KiB); only characters beyond it go through the patterns. About 10 ms per
MB of text on either path, so even a count_tokens body at the size limit costs the event loop
a tenth of a second at most. The memo of long texts is bounded by bytes (8 MiB).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import sys
from collections.abc import Iterable
from typing import Final

from kirod.canonical import wirejson
from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_CJK_RANGES = (
    "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0003ffff"
)

# (pattern, weight in tenths of a token): each match of the pattern costs its weight.
_CLASSES: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"[A-Za-z]{1,10}"), 10),
    (re.compile(r"[0-9]{1,3}"), 14),
    (re.compile(r"[!-/:-@\[-`{-~]{1,3}"), 10),
    (re.compile(r"\n"), 10),
    (re.compile(f"[{_CJK_RANGES}]"), 11),
    # Negated classes: word characters that are neither ASCII nor CJK…
    (re.compile(rf"[^\W\x00-\x7f{_CJK_RANGES}]"), 6),
    # …and visible characters that are none of word, space, ASCII or CJK.
    (re.compile(rf"[^\w\s\x00-\x7f{_CJK_RANGES}]"), 25),
)


def estimate_text_tokens(text: str) -> int:
    """Estimated Claude token count of `text`; any non-empty text costs at least one token."""
    if not text:
        return 0
    if len(text) < _MEMO_MIN_CHARS:
        return _estimate(text)
    return _MEMO.get(text)


def _estimate(text: str) -> int:
    tenths = _ascii_tenths(text) if text.isascii() else _mixed_tenths(text)
    return max(1, (tenths + 5) // 10)


def _regex_tenths(text: str) -> int:
    """The reference method: every class counted by its pattern."""
    return sum(weight * len(pattern.findall(text)) for pattern, weight in _CLASSES)


# ASCII text (most prompts, code and JSON) is counted without a regex, a few times faster, with
# the same result: only the first four classes can match it. A class of runs capped at `cap`
# characters makes ceil(L / cap) matches of a run of length L, which is 1 + floor((L - 1) / cap):
# map the class to "a" and everything else to " ", count the run starts (" a", after a leading
# space), then mark each run's first character and count the non-overlapping "a" * cap left.


def _run_table(codes: Iterable[int]) -> bytes:
    members = frozenset(codes)
    return bytes(0x61 if code in members else 0x20 for code in range(256))


_ASCII_RUNS: Final = (
    (_run_table([*range(0x41, 0x5B), *range(0x61, 0x7B)]), 10, 10),  # letters
    (_run_table(range(0x30, 0x3A)), 3, 14),  # digits
    (
        _run_table(
            [*range(0x21, 0x30), *range(0x3A, 0x41), *range(0x5B, 0x61), *range(0x7B, 0x7F)]
        ),
        3,
        10,
    ),  # symbols
)


def _ascii_tenths(text: str) -> int:
    return _byte_tenths(text.encode("ascii"))


def _byte_tenths(text: bytes) -> int:
    """The ASCII classes of UTF-8 `text`; bytes of other characters (all >= 0x80) end runs, as
    those characters end them in the patterns."""
    data = b" " + text
    tenths = 10 * data.count(b"\n")
    for table, cap, weight in _ASCII_RUNS:
        classes = data.translate(table)
        starts = classes.count(b" a")
        rest = classes.replace(b" a", b" b").count(b"a" * cap)
        tenths += weight * (starts + rest)
    return tenths


# Characters of the single-character classes, by class, for `_mixed_tenths`.
_SINGLE_CLASSES: Final = (
    (_CLASSES[4][0], "c", 11),
    (_CLASSES[5][0], "w", 6),
    (_CLASSES[6][0], "s", 25),
)
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


@functools.cache
def _bmp_classes() -> str:
    """A `str.translate` table of the BMP: each character's single-character class letter
    ("c", "w" or "s"), or a space (ASCII, whitespace, other)."""
    table = [" "] * 0x10000
    plane = "".join(map(chr, range(0x80, 0x10000)))
    for pattern, letter, _ in _SINGLE_CLASSES:
        for match in pattern.finditer(plane):
            table[0x80 + match.start()] = letter
    return "".join(table)


def _mixed_tenths(text: str) -> int:
    """The reference method's count, for text that is not all ASCII."""
    tenths = _byte_tenths(text.encode("utf-8", "surrogatepass"))
    classes = text.translate(_bmp_classes())  # characters beyond the BMP are left as they are
    tenths += sum(weight * classes.count(letter) for _, letter, weight in _SINGLE_CLASSES)
    astral = _ASTRAL.findall(text)
    if astral:
        tenths += _regex_tenths("".join(astral))
    return tenths


# From 64 characters, a text is looked up rather than counted: a tool call's input or a short
# turn (resent with every request too) is worth keeping, a shorter one costs less to count. The
# dict's own overhead per entry (under half of a 64-character text's size) is not in the budget.
_MEMO_MIN_CHARS: Final = 64
_MEMO_MAX_BYTES: Final = 8 * 1024 * 1024


class _Memo:
    """Estimates of recent long texts, bounded by the memory of the texts (`sys.getsizeof`:
    one to four bytes a character), least recently used out.

    Agents resend the same system prompt, tools and history with every request of a
    conversation, so most of a large request's text was estimated moments ago. A text larger
    than the whole budget is estimated and not kept. A pure-function cache: it changes no
    result, only how often one is computed.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: dict[str, int] = {}

    def get(self, text: str) -> int:
        tokens = self._entries.pop(text, None)
        if tokens is None:
            tokens = _estimate(text)
            size = sys.getsizeof(text)
            if size > self._max_bytes:
                return tokens
            self._bytes += size
            while self._bytes > self._max_bytes:
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                self._bytes -= sys.getsizeof(oldest)
        self._entries[text] = tokens
        return tokens


_MEMO: Final = _Memo(_MEMO_MAX_BYTES)


def estimate_json_tokens(value: object) -> int:
    """Estimated token count of a JSON value as the model reads it: compact, unescaped text.

    The text is `wirejson`'s, as sent upstream (orjson's when installed, which spells a few
    floats shorter: `1e-5` for `1e-05`).
    """
    try:
        text = wirejson.dumps(value).decode()
    except UnicodeEncodeError:  # a lone surrogate, which JSON escapes allow: count it as text
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return estimate_text_tokens(text)


# -- whole requests --------------------------------------------------------------------------------
#
# `estimate_request_tokens` is both the count_tokens answer and `message_start.usage.input_tokens`.
# It adds, to the text estimate of everything the model reads, what the API adds around it:
#
#     per request        4    turn framing and the final assistant prompt        (fitted)
#     per message        3    the role marker                                    (fitted)
#     per tool call      3    tool_use / tool_result framing                     (assumed)
#     tools declared   346    Anthropic's tool-use system prompt (its published figure for
#                             tool_choice auto/none), plus each tool as compact JSON
#     reasoning         30    thinking instructions (fitted; kirod's prompt tags cost 21-27)
#     image        <=1 600    width * height / 750 after scaling the long edge to 1 568 px, as
#                             Anthropic documents; dimensions are read from the PNG, GIF, JPEG or
#                             WebP header, and an unreadable header costs the 1 600 maximum
#     document             text formats (txt, md, csv, html) as their text; a PDF 1 500 per
#                          page object (the low end of Anthropic's 1 500-3 000 per page; pages
#                          inside compressed object streams are missed, so at least one);
#                          Office files one token per 2 bytes (assumed, not fitted)
#
# "Fitted" constants come from the counts Anthropic documents for its token-counting examples;
# against all of them the estimate is within 6 % (tests/protocols/test_anthropic_count_tokens.py).
# Echoed thinking counts only when it carries an upstream signature, since only such reasoning is
# replayed upstream; redacted reasoning is opaque and not counted. Newer Claude tokenizers make
# about 30 % more tokens of the same text, which no estimate here can see.

REQUEST_OVERHEAD: Final = 4
MESSAGE_OVERHEAD: Final = 3
TOOL_CALL_OVERHEAD: Final = 3
TOOLS_PROMPT_TOKENS: Final = 346
REASONING_OVERHEAD: Final = 30
IMAGE_MAX_TOKENS: Final = 1_600
IMAGE_MAX_EDGE: Final = 1_568
_IMAGE_PIXELS_PER_TOKEN: Final = 750
_IMAGE_HEADER_CHARS: Final = 256 * 1024  # base64 read to find a JPEG frame header
_IMAGE_SHORT_CHARS: Final = 64  # base64 of 48 bytes: every other header
_JPEG_BASE64: Final = "/9j/"  # FF D8 FF, the start of every JPEG
PDF_PAGE_TOKENS: Final = 1_500
_PDF_PAGE: Final = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")  # a page object, not /Pages
_TEXT_FORMATS: Final = frozenset({"csv", "html", "md", "txt"})
_OFFICE_BYTES_PER_TOKEN: Final = 2  # zipped or binary Office files: a few bytes of text each


def estimate_request_tokens(request: CanonicalRequest) -> int:
    """Estimated input tokens of the whole request, as the model will read it."""
    total = REQUEST_OVERHEAD + sum(estimate_text_tokens(text) for text in request.system)
    if request.tools:
        total += TOOLS_PROMPT_TOKENS + sum(
            estimate_json_tokens(
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            )
            for t in request.tools
        )
    if request.reasoning is not None:
        total += REASONING_OVERHEAD
    for message in request.messages:
        total += MESSAGE_OVERHEAD + sum(_block_tokens(block) for block in message.content)
    return total


def _block_tokens(block: Block) -> int:
    match block:
        case TextBlock():
            return estimate_text_tokens(block.text)
        case ImageBlock():
            return estimate_image_tokens(block)
        case DocumentBlock():
            return estimate_document_tokens(block) + estimate_text_tokens(block.context or "")
        case ToolUseBlock():
            return (
                TOOL_CALL_OVERHEAD
                + estimate_text_tokens(block.name)
                + estimate_json_tokens(dict(block.input))
            )
        case ToolResultBlock():
            return TOOL_CALL_OVERHEAD + sum(_block_tokens(part) for part in block.content)
        case ThinkingBlock():
            return estimate_text_tokens(block.thinking) if block.signature else 0
        case RedactedThinkingBlock():
            return 0


def estimate_image_tokens(image: ImageBlock) -> int:
    """Anthropic's image formula on the dimensions in the header, else its maximum."""
    size = image_size(image)
    if size is None:
        return IMAGE_MAX_TOKENS
    width, height = size
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    pixels = round(width * scale) * round(height * scale)
    return max(1, min(IMAGE_MAX_TOKENS, math.ceil(pixels / _IMAGE_PIXELS_PER_TOKEN)))


def estimate_document_tokens(document: DocumentBlock) -> int:
    """Text formats as their text; a PDF by its pages; other files by their size."""
    data = base64.b64decode(document.data_base64)
    if document.format in _TEXT_FORMATS:
        return max(1, estimate_text_tokens(data.decode("utf-8", "replace")))
    if document.format == "pdf":
        return max(1, len(_PDF_PAGE.findall(data))) * PDF_PAGE_TOKENS
    return max(1, math.ceil(len(data) / _OFFICE_BYTES_PER_TOKEN))


def image_size(image: ImageBlock) -> tuple[int, int] | None:
    """(width, height) as the image's header says, read from its first bytes; None if no PNG,
    GIF, JPEG or WebP header is there (a JPEG's frame header is looked for in its first 192 KiB).
    """
    data = image.data_base64
    size = _image_size(data[:_IMAGE_SHORT_CHARS])  # PNG, GIF and WebP say it at once
    if size is None and data.startswith(_JPEG_BASE64):
        size = _image_size(data[:_IMAGE_HEADER_CHARS])
    return size


def _image_size(prefix: str) -> tuple[int, int] | None:
    """(width, height) from the start of a base64 image; None if no known header is there."""
    try:
        head = base64.b64decode(prefix[: len(prefix) - len(prefix) % 4])
    except (binascii.Error, ValueError):
        return None
    size: tuple[int, int] | None = None
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        size = _be(head, 16, 4), _be(head, 20, 4)
    elif head[:6] in (b"GIF87a", b"GIF89a"):
        size = _le(head, 6, 2), _le(head, 8, 2)
    elif head.startswith(b"\xff\xd8"):
        size = _jpeg_size(head)
    elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        size = _webp_size(head)
    if size is None or min(size) <= 0:
        return None
    return size


def _be(data: bytes, at: int, length: int) -> int:
    return int.from_bytes(data[at : at + length], "big")


def _le(data: bytes, at: int, length: int) -> int:
    return int.from_bytes(data[at : at + length], "little")


_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the marker segments to the first start-of-frame (SOFn) header."""
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            at += 2
        elif marker in _JPEG_FRAMES:
            return _be(data, at + 7, 2), _be(data, at + 5, 2)
        else:
            at += 2 + _be(data, at + 2, 2)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return _le(data, 24, 3) + 1, _le(data, 27, 3) + 1
    if chunk == b"VP8 " and len(data) >= 30:
        return _le(data, 26, 2) & 0x3FFF, _le(data, 28, 2) & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = _le(data, 21, 4)
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None

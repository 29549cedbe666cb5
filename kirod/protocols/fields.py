"""Protocol-neutral field checks and request bounds shared by the codecs.

Each check raises `ApiError` (400, `invalid_request`) whose message and `param` name the
offending field path, so every codec reports a bad field the same way. Codecs never import
each other (docs/ARCHITECTURE.md §3.3); what they share lives here.

Bounds (docs/RELIABILITY.md, "Request bounds"), the same in every protocol, each a 400 naming it:

    MAX_MESSAGES     10 000   messages (Messages, Chat), or input plus stored items (Responses)
    MAX_BLOCKS       20 000   content blocks and parts in all: text, images, tool calls and
                              results and their parts, thinking, system blocks
    MAX_TOOLS         1 000   declared tools: namespaced functions and hosted tools counted
    MAX_DEPTH           128   nested arrays and objects, in the body (kirod.http.body) and in
                              a tool call's JSON-encoded `arguments`
    MAX_CONTAINERS  100 000   arrays and objects in the body, and in such `arguments`
    MAX_MODEL_CHARS     128   the `model` name, an identifier (kirod.canonical.model_ids)
    MAX_DOCUMENT_BYTES  4.5 MB  one attached document, decoded (Bedrock Converse's limit for the
                              document shape Kiro's model copies; Kiro's own is unknown)
    MAX_DOCUMENT_NAME   1000  a document's name (file name or title), as read; Kiro's own rule
                              (200 characters of a few kinds) is met by renaming upstream
    metadata          16 pairs, keys of at most 64 characters, values of at most 512 (OpenAI's
                              own limits; Anthropic's `metadata.user_id` at most 256)

Kiro refuses payloads above ~600 KB anyway (kirod.upstream.payload), so no servable request comes
near the counts; they bound the work and memory one request can cost before that check.
A value compared with a set of names (a `type`, an effort) must be a string first: a list there
is a 400, never an unhashable-type error.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias, TypeGuard

from kirod.canonical import wirejson
from kirod.canonical.model_ids import model_id_problem
from kirod.canonical.request import (
    DOCUMENT_MEDIA_TYPES,
    DocumentBlock,
    DocumentFormat,
    ImageBlock,
)
from kirod.errors import ApiError, ErrorKind

_DATA_URL: Final = re.compile(r"data:(image/[\w.+-]{1,100});base64,(.+)", re.DOTALL)
_DATA_URL_FILE: Final = re.compile(r"data:([\w.+-]{1,100}/[\w.+-]{1,100});base64,(.+)", re.DOTALL)
_FORMATS: Final[Mapping[str, DocumentFormat]] = {f: f for f in DOCUMENT_MEDIA_TYPES.values()}

MAX_MESSAGES: Final = 10_000
MAX_BLOCKS: Final = 20_000
MAX_TOOLS: Final = 1_000
MAX_DEPTH: Final = 128
MAX_CONTAINERS: Final = 100_000
MAX_DOCUMENT_BYTES: Final = 4_500_000
MAX_DOCUMENT_NAME: Final = 1000
_MAX_DOCUMENT_BASE64: Final = -(-MAX_DOCUMENT_BYTES // 3) * 4
MAX_METADATA_PAIRS: Final = 16
MAX_METADATA_KEY: Final = 64
MAX_METADATA_VALUE: Final = 512
_QUOTED_CHARS: Final = 64
_CONTAINERS: Final = frozenset({dict, list})  # what JSON decodes arrays and objects to


def is_object(value: object) -> TypeGuard[Mapping[str, Any]]:
    """`isinstance(value, Mapping)`; the dicts JSON decodes to are spared the ABC's check,
    several times slower, and run on every object of a request."""
    return value.__class__ is dict or isinstance(value, Mapping)


def invalid(param: str, message: str, code: str = "invalid_value") -> ApiError:
    text = f"'{param}': {message}" if param else message
    return ApiError(ErrorKind.INVALID_REQUEST, text, code=code, param=param or None)


def unsupported(param: str, message: str) -> ApiError:
    return ApiError(
        ErrorKind.INVALID_REQUEST,
        f"'{param}': {message}",
        code="unsupported_capability",
        param=param,
    )


Fail: TypeAlias = Callable[[str, str, str], ApiError]
"""Builds a codec's 400 from the field's path, the problem and an OpenAI error code."""


class Checks:
    """Value checks for one codec; each raises the 400 its `fail` builds.

    The OpenAI codecs name the field as `'path': problem` with an error code (`invalid`); the
    Anthropic codec writes `path: problem`, as Anthropic's API does. The problems are the same.
    """

    __slots__ = ("fail",)

    def __init__(self, fail: Fail) -> None:
        self.fail = fail

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if not is_object(value):
            raise self.fail(path, "must be an object", "invalid_type")
        return value

    def array(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, "must be an array", "invalid_type")
        return value

    def text(self, value: object, path: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, "must be a string", "invalid_type")
        return value

    def nonempty_text(self, value: object, path: str) -> str:
        text = self.text(value, path)
        if not text:
            raise self.fail(path, "must not be empty", "invalid_value")
        return text

    def model(self, value: object, path: str = "model") -> str:
        """The required `model`: an identifier of at most `MAX_MODEL_CHARS` characters."""
        if value is None:
            raise self.fail(path, "is required", "missing_required_parameter")
        name = self.text(value, path)
        problem = model_id_problem(name)
        if problem is not None:
            raise self.fail(path, problem.text, problem.code)
        return name

    def boolean(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, "must be a boolean", "invalid_type")
        return value

    def integer(self, value: object, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, "must be an integer", "invalid_type")
        return value

    def positive_integer(self, value: object, path: str) -> int:
        """A required integer of at least 1."""
        if value is None:
            raise self.fail(path, "is required", "missing_required_parameter")
        number = self.integer(value, path)
        if number < 1:
            raise self.fail(path, "must be at least 1", "invalid_value")
        return number

    def number(self, value: object, path: str, low: float, high: float) -> float | None:
        """An optional number between `low` and `high`."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, "must be a number", "invalid_type")
        if not low <= value <= high:
            raise self.fail(path, f"must be between {low:g} and {high:g}", "invalid_value")
        return float(value)

    def document_name(self, value: object, path: str) -> str:
        """A document's optional name: at most `MAX_DOCUMENT_NAME` characters, "" if blank
        (the upstream names an unnamed document by its place: `kirod.upstream.documents`)."""
        name = "" if value is None else self.text(value, path).strip()
        if len(name) > MAX_DOCUMENT_NAME:
            raise self.fail(
                path, f"must be at most {MAX_DOCUMENT_NAME} characters", "string_too_long"
            )
        return name

    def document_format(self, media_type: str, path: str) -> DocumentFormat:
        document_format = DOCUMENT_MEDIA_TYPES.get(media_type.lower())
        if document_format is None:
            raise self.fail(
                path,
                f"document type {quoted(media_type)} is not supported; use one of "
                + ", ".join(DOCUMENT_MEDIA_TYPES),
                "invalid_value",
            )
        return document_format

    def document_data(self, value: object, path: str) -> str:
        """Base64 of at most `MAX_DOCUMENT_BYTES` bytes (measured before decoding)."""
        data = self.nonempty_text(value, path)
        if len(data) > _MAX_DOCUMENT_BASE64:
            raise self.fail(
                path, f"documents must be at most {MAX_DOCUMENT_BYTES} bytes", "string_too_long"
            )
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise self.fail(path, "is not valid base64", "invalid_value") from None
        return data


OPENAI: Final = Checks(invalid)


def data_url_document(url: str, filename: object, param: str, name_param: str) -> DocumentBlock:
    """An inline file from a base64 data URL; its format from the media type, or from the file
    name's extension when the type is generic (`application/octet-stream`)."""
    match = _DATA_URL_FILE.fullmatch(url)
    if match is None:
        raise invalid(
            param,
            "files must be base64 data URLs (data:application/pdf;base64,…); kirod fetches no URLs",
        )
    name = OPENAI.document_name(filename, name_param)
    media_type = match[1]
    by_extension = _FORMATS.get(name.rpartition(".")[2].lower())
    if media_type.lower() in DOCUMENT_MEDIA_TYPES or by_extension is None:
        document_format = OPENAI.document_format(media_type, param)
    else:
        document_format = by_extension
    return DocumentBlock(name, document_format, OPENAI.document_data(match[2], param))


def string_field(
    obj: Mapping[str, Any], key: str, parent: str, *, required: bool = False
) -> str | None:
    """`obj[key]`, a string or absent; `parent` is the path of `obj` ("" for the body), and the
    field's own path is made only for an error: most fields of a request are read here."""
    value = obj.get(key)
    if value.__class__ is str:
        return value
    path = f"{parent}.{key}" if parent else key
    if value is None:
        if required:
            raise invalid(path, "is required", "missing_required_parameter")
        return None
    return OPENAI.text(value, path)


def boolean_field(obj: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = obj.get(key)
    return default if value is None else OPENAI.boolean(value, key)


def positive_integer(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return None if value is None else OPENAI.positive_integer(value, key)


def number_field(obj: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    return OPENAI.number(obj.get(key), key, low, high)


def quoted(value: object) -> str:
    """`value` for an error message: its repr, cut to a few dozen characters."""
    scalar = value is None or isinstance(value, str | int | float)
    text = repr(value) if scalar else f"<{type(value).__name__}>"
    return text if len(text) <= _QUOTED_CHARS else text[: _QUOTED_CHARS - 1] + "…"


def model_name(value: object, param: str = "model") -> str:
    """The required `model`, checked as the OpenAI codecs report a field."""
    return OPENAI.model(value, param)


def at_most(count: int, limit: int, param: str, what: str) -> None:
    """A 400 when a request carries more than `limit` of `what`."""
    if count > limit:
        raise invalid(param, f"at most {limit} {what} are allowed ({count} sent)", "too_many")


class BlockBudget:
    """Counts content blocks across one request, up to `MAX_BLOCKS`."""

    __slots__ = ("_left",)

    def __init__(self) -> None:
        self._left = MAX_BLOCKS

    def take(self, count: int) -> bool:
        """Count `count` more blocks; False once the request holds more than the limit."""
        self._left -= count
        return self._left >= 0

    def spend(self, count: int, param: str) -> None:
        """`take`, raising the 400 when past the limit."""
        if not self.take(count):
            raise invalid(
                param,
                f"at most {MAX_BLOCKS} content blocks and parts are allowed in one request",
                "too_many",
            )


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether decoded JSON `value` nests arrays and objects more than `limit` levels deep.

    Level by level, without recursion; about 0.3 µs per array or object.
    """
    return shape(value, limit)[0]


_INT64: Final = float(2**63)


def shape(value: object, limit: int = MAX_DEPTH) -> tuple[bool, bool]:
    """`too_deep`, and whether `value` holds a float of magnitude 2**63 or more (as orjson
    reads an integer beyond 64 bits: `kirod.http.body`), in the same pass."""
    wide = value.__class__ is float and not -_INT64 < value < _INT64
    level: list[Any] = [value] if value.__class__ in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True, wide
        below: list[Any] = []
        keep = below.append
        for node in level:
            for child in node.values() if node.__class__ is dict else node:
                kind = child.__class__
                if kind is dict or kind is list:
                    keep(child)
                elif kind is float and not -_INT64 < child < _INT64:
                    wide = True
        level = below
    return False, wide


def exact_orjson(data: bytes | bytearray | str) -> tuple[Any, bool] | None:
    """orjson's reading of `data`, and whether it nests deeper than `MAX_DEPTH`, where that
    reading is `json.loads`'s; None where it may not be, for `json.loads` to decide.

    orjson fails on all that `json.loads` refuses and on some that it reads (NaN, `1e400`, a lone
    surrogate escape, a BOM). The one silent difference is an integer beyond 64 bits, which
    orjson reads as a float: a document holding a float that large is left to `json.loads` too.
    Two to six times faster than `json.loads`, the depth walk included.
    """
    loads = wirejson.ORJSON_LOADS
    if loads is None:
        return None
    try:
        value = loads(data)
    except ValueError:  # orjson.JSONDecodeError
        return None
    deep, wide = shape(value)  # orjson reads integers in [-2**63, 2**64) exactly
    return None if wide else (value, deep)


def string_metadata(value: object) -> dict[str, str]:
    """The top-level `metadata` object: at most 16 string keys (64 characters) to string values
    (512 characters), as OpenAI documents."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid("metadata", "must be an object of strings", "invalid_type")
    at_most(len(value), MAX_METADATA_PAIRS, "metadata", "metadata pairs")
    for key, entry in value.items():
        if len(key) > MAX_METADATA_KEY:
            raise invalid(
                "metadata", f"keys must be at most {MAX_METADATA_KEY} characters", "string_too_long"
            )
        if not isinstance(entry, str):
            raise invalid(f"metadata.{key}", "metadata values must be strings", "invalid_type")
        if len(entry) > MAX_METADATA_VALUE:
            raise invalid(
                f"metadata.{key}",
                f"must be at most {MAX_METADATA_VALUE} characters",
                "string_too_long",
            )
    return dict(value)


def json_arguments(text: str, param: str) -> Mapping[str, Any]:
    """Tool-call arguments: a JSON object encoded as a string (blank means no arguments),
    nested at most `MAX_DEPTH` levels, with at most `MAX_CONTAINERS` arrays and objects."""
    if not text.strip():
        return {}
    # At most one container per two characters: only a long text can hold too many.
    if len(text) > 2 * MAX_CONTAINERS and text.count("{") + text.count("[") > MAX_CONTAINERS:
        raise invalid(param, f"must not hold more than {MAX_CONTAINERS} arrays and objects")
    read = exact_orjson(text)
    if read is not None and not read[1]:
        value, deep = read[0], False
    else:  # `json.loads` decides, and what it says of a document too deep for it
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        deep = isinstance(value, dict) and too_deep(value)
    if not isinstance(value, dict):
        raise invalid(param, "must be a JSON object encoded as a string")
    if deep:
        raise invalid(param, f"must not nest arrays and objects more than {MAX_DEPTH} levels")
    return value


def data_url_image(url: str, param: str) -> ImageBlock:
    """An inline image from a base64 data URL; kirod fetches no remote URLs."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise invalid(
            param,
            "images must be base64 data URLs (data:image/png;base64,…); kirod fetches no URLs",
        )
    return ImageBlock(match[1], match[2])

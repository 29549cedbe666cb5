"""Protocol-neutral field checks shared by the OpenAI-style codecs (Chat and Responses).

Each check raises `ApiError` (400, `invalid_request`) whose message and `param` name the
offending field path, so every codec reports a bad field the same way. Codecs never import
each other (DESIGN.md §2); what they share lives here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import ImageBlock
from kirod.errors import ApiError, ErrorKind

_DATA_URL: Final = re.compile(r"data:(image/[\w.+-]+);base64,(.+)", re.DOTALL)


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


def string_field(
    obj: Mapping[str, Any], key: str, path: str, *, required: bool = False
) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise invalid(path, "is required", "missing_required_parameter")
        return None
    if not isinstance(value, str):
        raise invalid(path, "must be a string", "invalid_type")
    return value


def boolean_field(obj: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(key, "must be a boolean", "invalid_type")
    return value


def positive_integer(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(key, "must be an integer", "invalid_type")
    if value < 1:
        raise invalid(key, "must be at least 1")
    return value


def number_field(obj: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise invalid(key, "must be a number", "invalid_type")
    if not low <= value <= high:
        raise invalid(key, f"must be between {low:g} and {high:g}")
    return float(value)


def string_metadata(value: object) -> dict[str, str]:
    """The top-level `metadata` object: string keys to string values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid("metadata", "must be an object of strings", "invalid_type")
    for key, entry in value.items():
        if not isinstance(entry, str):
            raise invalid(f"metadata.{key}", "metadata values must be strings", "invalid_type")
    return dict(value)


def json_arguments(text: str, param: str) -> Mapping[str, Any]:
    """Tool-call arguments: a JSON object encoded as a string (blank means no arguments)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise invalid(param, "must be a JSON object encoded as a string")
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

"""Error envelopes of the API families, rendered from protocol-neutral `ApiError`s.

Anthropic: `{"type":"error","error":{"type","message"},"request_id"}`.
OpenAI (Responses and Chat): `{"error":{"message","type","param","code"},"request_id"}`.
Ollama: `{"error": message}` (its clients read that string and nothing else; the request id
is in the `x-request-id` header of every answer).
Gemini: Google's `{"error":{"code","message","status","details"}}`, `status` the gRPC code name
its SDKs read, the request id in a `google.rpc.RequestInfo` detail.
Both codecs of the OpenAI family share one envelope, so it lives here rather than in either.
"""

from __future__ import annotations

import enum
from typing import Any

from kirod.errors import ApiError, ErrorKind


class Family(enum.Enum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    OLLAMA = "ollama"
    GEMINI = "gemini"


_ANTHROPIC_TYPES: dict[ErrorKind, str] = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.METHOD_NOT_ALLOWED: "invalid_request_error",
    ErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.INTERNAL: "api_error",
    ErrorKind.UPSTREAM: "api_error",
    # Not `overloaded_error`: kirod's 503s are "no usable account", which Claude Code would
    # replace with its own "API is at capacity" text instead of showing the message.
    ErrorKind.UNAVAILABLE: "api_error",
    ErrorKind.INSUFFICIENT_STORAGE: "api_error",
    ErrorKind.OVERLOADED: "overloaded_error",
}

_OPENAI_TYPES: dict[ErrorKind, str] = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "invalid_request_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "invalid_request_error",
    ErrorKind.METHOD_NOT_ALLOWED: "invalid_request_error",
    ErrorKind.REQUEST_TOO_LARGE: "invalid_request_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.INTERNAL: "server_error",
    ErrorKind.UPSTREAM: "server_error",
    ErrorKind.UNAVAILABLE: "service_unavailable",
    ErrorKind.INSUFFICIENT_STORAGE: "server_error",
    ErrorKind.OVERLOADED: "service_unavailable",
}


def anthropic_error(error: ApiError, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": _ANTHROPIC_TYPES[error.kind], "message": error.message},
        "request_id": request_id,
    }


def openai_error(error: ApiError, request_id: str) -> dict[str, Any]:
    return {
        "error": {
            "message": error.message,
            "type": _OPENAI_TYPES[error.kind],
            "param": error.param,
            "code": error.code,
        },
        "request_id": request_id,
    }


_GOOGLE_STATUSES: dict[ErrorKind, str] = {
    ErrorKind.INVALID_REQUEST: "INVALID_ARGUMENT",
    ErrorKind.AUTHENTICATION: "UNAUTHENTICATED",
    ErrorKind.PERMISSION: "PERMISSION_DENIED",
    ErrorKind.NOT_FOUND: "NOT_FOUND",
    ErrorKind.METHOD_NOT_ALLOWED: "UNIMPLEMENTED",
    ErrorKind.REQUEST_TOO_LARGE: "INVALID_ARGUMENT",
    ErrorKind.RATE_LIMIT: "RESOURCE_EXHAUSTED",
    ErrorKind.INTERNAL: "INTERNAL",
    ErrorKind.UPSTREAM: "INTERNAL",
    ErrorKind.UNAVAILABLE: "UNAVAILABLE",
    ErrorKind.INSUFFICIENT_STORAGE: "INTERNAL",
    ErrorKind.OVERLOADED: "UNAVAILABLE",
}
_REQUEST_INFO = "type.googleapis.com/google.rpc.RequestInfo"


_GEMINI_HINTS: dict[str, str] = {
    "context_length_exceeded": (
        "; in Gemini CLI run /compress, and set model.compressionThreshold for this model's "
        "window (it never compresses on an error: docs/guide/client-settings.md, Gemini CLI)"
    ),
}
"""What a Gemini client's user can do about an error, where Google's own message would not say:
Gemini CLI compresses only by its threshold (docs/CLIENTS.md §4.4)."""


def gemini_error(error: ApiError, request_id: str) -> dict[str, Any]:
    return {
        "error": {
            "code": error.status,
            "message": error.message + _GEMINI_HINTS.get(error.code or "", ""),
            "status": _GOOGLE_STATUSES[error.kind],
            "details": [{"@type": _REQUEST_INFO, "requestId": request_id}],
        }
    }


def ollama_error(error: ApiError) -> dict[str, Any]:
    return {"error": error.message}


def render(family: Family, error: ApiError, request_id: str) -> dict[str, Any]:
    if family is Family.ANTHROPIC:
        return anthropic_error(error, request_id)
    if family is Family.OLLAMA:
        return ollama_error(error)
    if family is Family.GEMINI:
        return gemini_error(error, request_id)
    return openai_error(error, request_id)

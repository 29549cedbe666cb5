"""The outermost middleware: request id, access log, and every error rendered in its envelope.

A client that goes away (its handler cancelled, its connection reset or closed under a write, its
body cut short) is no error of kirod's: its access-log line says `status=499 error=client_closed`
at info, as its operation-log row says 499 `client_closed`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from kirod import log
from kirod.errors import (
    ApiError,
    ClientDisconnected,
    DatabaseDamaged,
    ErrorKind,
    StoreFull,
    insufficient_storage,
)
from kirod.protocols.envelopes import Family, render

logger = logging.getLogger(__name__)
access_log = logging.getLogger(log.ACCESS)

REQUEST_ID = web.RequestKey("request_id", str)
API_KEY_ID = web.RequestKey("api_key_id", str)  # set by the key gate: the tenant of the request
CLIENT_CLOSED = 499
MAX_CORRELATION_ID = 128

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_request_id() -> str:
    """`req_`, the second as 8 hex digits, 16 random ones: ids of one second sort together, so
    the operation log's index of them grows at its end, like the log (storage/oplog.py)."""
    return f"req_{int(time.time()) & 0xFFFFFFFF:08x}{secrets.token_hex(8)}"


OLLAMA_PREFIX = "/api"
GEMINI_PREFIX = "/v1beta"
_V1_MODELS = "/v1/models/"


def is_ollama_path(path: str) -> bool:
    return path == OLLAMA_PREFIX or path.startswith(OLLAMA_PREFIX + "/")


def is_gemini_request(method: str, path: str) -> bool:
    """The Gemini API's: anything under /v1beta, and a POST of `/v1/models/{model}:{method}`
    (what google-genai calls when given only a base URL); a GET there is kirod's own model
    lookup, whose id may hold a colon."""
    if path == GEMINI_PREFIX or path.startswith(GEMINI_PREFIX + "/"):
        return True
    return method == "POST" and path.startswith(_V1_MODELS) and ":" in path[len(_V1_MODELS) :]


def path_family(method: str, path: str) -> Family | None:
    """The API a request line names by itself, and so the envelope of its errors: Ollama's under
    /api, Google's for the Gemini API (`is_gemini_request`), Anthropic's under /v1/messages,
    OpenAI's under the rest of /v1; None outside the APIs. The one place that maps paths to
    protocols: the error envelopes, the malformed-request answers and CORS all ask it, so a new
    protocol adds its paths here."""
    if is_ollama_path(path):
        return Family.OLLAMA
    if is_gemini_request(method, path):
        return Family.GEMINI
    if path.startswith("/v1/messages"):
        return Family.ANTHROPIC
    if path == "/v1" or path.startswith("/v1/"):
        return Family.OPENAI
    return None


def family_for(request: web.Request) -> Family:
    """The path's family (`path_family`); a shared route (`/v1/models`, `/v1/…`) asked in
    Anthropic's dialect, or a path outside the APIs, gets Anthropic's envelope when the request
    carries `anthropic-version`, else OpenAI's."""
    family = path_family(request.method, request.path)
    if family is not None and family is not Family.OPENAI:
        return family
    if "anthropic-version" in request.headers:
        return Family.ANTHROPIC
    return Family.OPENAI


def error_response(request: web.Request, error: ApiError) -> web.Response:
    body = render(family_for(request), error, request[REQUEST_ID])
    response = web.json_response(body, status=error.status, dumps=json.dumps)
    response.headers.update(error.headers)
    if error.final:
        response.headers["x-should-retry"] = "false"
    return response


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return ApiError(
            ErrorKind.METHOD_NOT_ALLOWED,
            f"method {request.method} is not allowed on {request.path}; allowed: {allowed}",
            code="method_not_allowed",
            headers={"Allow": allowed},
        )
    if isinstance(exc, web.HTTPNotFound):
        return ApiError(
            ErrorKind.NOT_FOUND,
            f"no such route: {request.method} {request.path[:MAX_SHOWN_PATH]}"
            + _base_url_hint(request.path),
            code="not_found",
        )
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return ApiError(
            ErrorKind.REQUEST_TOO_LARGE, "request body is too large", code="request_too_large"
        )
    kind = next((k for k in ErrorKind if k.status == exc.status), ErrorKind.INVALID_REQUEST)
    return ApiError(kind, exc.reason, code=None)


MAX_SHOWN_PATH = 200
_API_PATHS = ("/messages", "/responses", "/chat/completions", "/models")


def _base_url_hint(path: str) -> str:
    """What a 404 most often means: a base URL with one /v1 too many, or one too few."""
    if path.startswith("/v1beta/v1beta/"):
        return (
            "; the base URL ends in /v1beta and the client adds another: drop it (Gemini CLI's "
            "GOOGLE_GEMINI_BASE_URL takes none)"
        )
    if path.startswith("/v1/v1/"):
        return (
            "; the base URL ends in /v1 and the client adds another: drop it (Claude Code's "
            "ANTHROPIC_BASE_URL takes none, OpenAI clients take one)"
        )
    if path.startswith(_API_PATHS):
        return "; the API lives under /v1: add /v1 to the client's base URL"
    return ""


def _fingerprint(exc: BaseException) -> tuple[str, str]:
    """A short hash of the failure, and where it happened, for logs without exception text."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
    detail = f"{type(exc).__qualname__}|{where}|{exc}"
    return hashlib.sha256(detail.encode("utf-8", "replace")).hexdigest()[:12], where


def _correlation_id(request: web.Request) -> str | None:
    value = request.headers.get("x-request-id")
    if value is None:
        return None
    return "".join(c for c in value[:MAX_CORRELATION_ID] if c.isprintable())


DATABASE_DAMAGED = ApiError(
    ErrorKind.UNAVAILABLE,
    "kirod's database is damaged, so it cannot store or read what this request needs; requests "
    "that need neither are still served. Its operator must stop kirod and run `kiroctl db recover`",
    code="database_damaged",
)


def make_ingress() -> Middleware:
    @web.middleware
    async def ingress(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = new_request_id()
        request[REQUEST_ID] = request_id
        token = log.request_id_var.set(request_id)
        annotations: dict[str, Any] = {}
        fields_token = log.request_fields_var.set(annotations)
        loop = asyncio.get_running_loop()
        started = loop.time()
        status = 500
        try:
            try:
                response = await handler(request)
            except (ClientDisconnected, ConnectionError):
                # Gone while its body was read, or reset or closed while its answer was written
                # (aiohttp's ClientConnectionResetError): the operation log's 499 too.
                status = CLIENT_CLOSED
                return web.Response(status=400)  # nobody is left to send it to
            except ApiError as error:
                response = error_response(request, error)
            except web.HTTPException as exc:
                response = error_response(request, _from_http_exception(request, exc))
            except StoreFull as full:  # a write the request needed found the disk full
                response = error_response(request, insufficient_storage(full))
            except DatabaseDamaged:
                # The store went read-only (kirod.storage.db): this request needed what it
                # cannot write or read now. The daemon logged the file once; the client is told
                # what it can act on, not the path.
                response = error_response(request, DATABASE_DAMAGED)
            except asyncio.CancelledError:
                status = CLIENT_CLOSED
                raise
            except Exception as exc:
                digest, where = _fingerprint(exc)
                log.event(
                    logger,
                    "unhandled_error",
                    level=logging.ERROR,
                    error=type(exc).__name__,
                    where=where,
                    detail_hash=digest,
                )
                response = error_response(
                    request,
                    ApiError(
                        ErrorKind.INTERNAL,
                        f"internal error (request {request_id}, ref {digest})",
                        code="internal_error",
                    ),
                )
            status = response.status
            return response
        finally:
            if status == CLIENT_CLOSED:
                annotations["error"] = "client_closed"
            fields: dict[str, Any] = {
                "method": request.method,
                "path": request.path,
                "status": status,
                "duration_ms": round((loop.time() - started) * 1000, 1),
                "client_request_id": _correlation_id(request),
            }
            for key, value in annotations.items():
                fields.setdefault(key, value)
            log.event(access_log, "request", **fields)
            log.request_fields_var.reset(fields_token)
            log.request_id_var.reset(token)

    return ingress


async def add_request_id_header(request: web.Request, response: web.StreamResponse) -> None:
    """Runs on every response, streamed ones included, before its headers go out."""
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers["x-request-id"] = request_id
        response.headers["request-id"] = request_id  # what the Anthropic SDK reads
    response.headers["Server"] = "kirod"

"""`GET /v1/models` and `GET /v1/models/{id}`, in a shape both OpenAI and Anthropic SDKs accept.

The list is what the model directory offers (the active accounts' catalogs, or the static one
before any account answered), the same list as `kiroctl models`: one row per model, by its
public id. Any name a request may use (a dated id, a Kiro id, an alias, a family word) resolves
on `GET /v1/models/{id}` to the model that would serve it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kirod.canonical.catalog import ListedModel, ModelCatalog, public_models
from kirod.canonical.model_names import parse_name
from kirod.errors import ApiError, ErrorKind
from kirod.http.ingress import API_KEY_ID
from kirod.http.services import SERVICES
from kirod.protocols.fields import model_name

# Models carry no release date upstream; a fixed one keeps the list stable across restarts.
CREATED = 1_735_689_600  # 2025-01-01T00:00:00Z
CREATED_AT = "2025-01-01T00:00:00Z"
MAX_LIMIT = 1000


async def offered_catalog(request: web.Request) -> ModelCatalog:
    return (await request.app[SERVICES].models.offers()).catalog


def _entry(listed: ListedModel, anthropic: bool) -> dict[str, Any]:
    """One model in both SDKs' shapes; an Anthropic client (it sends `anthropic-version`) also
    gets the fields its SDK's ModelInfo reads: `max_input_tokens`, `max_tokens`, `lifecycle`
    and the Claude `line`."""
    owner = "anthropic" if listed.id.startswith("claude") else "kiro"
    entry: dict[str, Any] = {
        "id": listed.id,
        "object": "model",
        "created": CREATED,
        "owned_by": owner,
        "type": "model",
        "display_name": listed.info.display_name,
        "created_at": CREATED_AT,
        "context_window": listed.info.context_window,
        "max_output_tokens": listed.info.max_output_tokens,
        "kiro_id": listed.info.kiro_id,
    }
    if anthropic:
        name = parse_name(listed.info.kiro_id)
        entry.update(
            max_input_tokens=listed.info.context_window,
            max_tokens=listed.info.max_output_tokens,
            lifecycle="active",
            line=name.line if name.vendor == "claude" else None,
        )
    return entry


def _anthropic(request: web.Request) -> bool:
    return "anthropic-version" in request.headers


def visible_models(request: web.Request, catalog: ModelCatalog) -> list[ListedModel]:
    """The listed models this request's API key may use."""
    gate, key_id = request.app[SERVICES].gate, request[API_KEY_ID]
    return [listed for listed in public_models(catalog) if gate.allows(key_id, listed.info)]


async def list_models(request: web.Request) -> web.Response:
    shape = _anthropic(request)
    rows = [
        _entry(listed, shape) for listed in visible_models(request, await offered_catalog(request))
    ]
    after = request.query.get("after_id")
    if after is not None:
        ids = [row["id"] for row in rows]
        rows = rows[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = int(request.query.get("limit", MAX_LIMIT))
    except ValueError:
        raise ApiError(
            ErrorKind.INVALID_REQUEST, "limit must be an integer", param="limit"
        ) from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(
            ErrorKind.INVALID_REQUEST, f"limit must be from 1 to {MAX_LIMIT}", param="limit"
        )
    page, more = rows[:limit], len(rows) > limit
    return web.json_response(
        {
            "object": "list",
            "data": page,
            "has_more": more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
    )


async def get_model(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    name = model_name(request.match_info["model_id"])
    info = services.models.lookup(name, await offered_catalog(request)).info
    if not services.gate.allows(request[API_KEY_ID], info):
        raise ApiError(
            ErrorKind.NOT_FOUND,
            f"model '{info.public_id}' is not available to this API key",
            code="model_not_found",
            param="model",
        )
    return web.json_response(_entry(ListedModel(info.public_id, info), _anthropic(request)))

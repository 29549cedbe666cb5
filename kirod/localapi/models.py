"""The models kirod serves, from the model directory: what `kiroctl models` shows.

The same list as the public `/v1/models` (each active account's catalog, fetched when stale, or
the static one before any is known), with which accounts offer each model, the configured
aliases, what the family words resolve to, what serves each id the supported clients send by
default (`client_models`), and the substitutions made since start.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kirod.accounts.models import ModelDirectory, Offer
from kirod.canonical.client_models import CLIENT_MODELS
from kirod.canonical.models import ModelCatalog
from kirod.errors import ApiError
from kirod.localapi.control import CONTROL


def _row(offer: Offer) -> dict[str, Any]:
    info = offer.info
    return {
        "id": info.public_id,
        "kiro_id": info.kiro_id,
        "display_name": info.display_name,
        "context_window": info.context_window,
        "max_output_tokens": info.max_output_tokens,
        "supports_images": info.supports_images,
        "supports_documents": info.supports_documents,
        "accounts": list(offer.accounts),
    }


async def document(directory: ModelDirectory) -> dict[str, Any]:
    """{"source": "accounts" | "static", "models": [...], "aliases", "fallback", ...}."""
    offers = await directory.offers()
    policy = directory.policy
    return {
        "source": offers.source,
        "models": [_row(offer) for offer in offers.models],
        "fallback": policy.fallback,
        "aliases": dict(policy.aliases),
        "families": directory.family_defaults(offers.catalog),
        "clients": _clients(directory, offers.catalog),
        "substitutions": [
            {"requested": s.requested, "served": s.served, "via": s.via}
            for s in directory.substitutions()
        ],
    }


def _clients(directory: ModelDirectory, catalog: ModelCatalog) -> list[dict[str, Any]]:
    """What serves each id the supported clients send by default, and why."""
    rows = []
    for asked in CLIENT_MODELS:
        row: dict[str, Any] = {"client": asked.client, "role": asked.role, "id": asked.id}
        try:
            resolution = directory.lookup(asked.id, catalog)
        except ApiError:
            row.update(served=None, via=None, why="no account offers a model of its kind")
        else:
            row.update(served=resolution.info.kiro_id, via=resolution.via, why=resolution.why)
        rows.append(row)
    return rows


async def list_models(request: web.Request) -> web.Response:
    return web.json_response(await document(request.app[CONTROL].models))

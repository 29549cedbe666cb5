"""The models kirod serves, from the model directory: what `kiroctl models` shows.

The same list as the public `/v1/models` (each active account's catalog, fetched when stale, or
the static one before any is known), with which accounts offer each model, the configured
aliases, what the family words resolve to, what serves each id the supported clients send by
default (`ModelDirectory.client_defaults`), and the substitutions made since start. Each model
has its listed window and those kirod learned on accounts (`kirod.accounts.windows`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from kirod.accounts.model_directory import ModelDirectory, Offer
from kirod.localapi.control import CONTROL


def _row(offer: Offer) -> dict[str, Any]:
    info = offer.info
    return {
        "id": info.public_id,
        "kiro_id": info.kiro_id,
        "display_name": info.display_name,
        "context_window": info.context_window,  # the prompt limit every offering account takes
        "listed_window": offer.listed_window or info.context_window,
        "learned_windows": [
            {"account": w.account_id, "window": w.window, "learned_at": w.learned_at}
            for w in offer.learned
        ],
        "max_output_tokens": info.max_output_tokens,
        "supports_images": info.supports_images,
        "supports_documents": info.supports_documents,
        "refusal_fallback_models": list(info.refusal_fallback_models),
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
        "clients": [asdict(row) for row in directory.client_defaults(offers.catalog)],
        "substitutions": [
            {"requested": s.requested, "served": s.served, "via": s.via}
            for s in directory.substitutions()
        ],
    }


async def list_models(request: web.Request) -> web.Response:
    return web.json_response(await document(request.app[CONTROL].models))

"""The models kirod serves: each active account's catalog, or the static one before any is known.

Unlike the public `/v1/models`, this asks each active account for its list (cached for an hour),
so `kiroctl models` is right straight after a login, and says which accounts offer each model.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kirod.accounts.account import to_upstream
from kirod.canonical.models import STATIC_CATALOG, ModelInfo
from kirod.localapi.control import CONTROL
from kirod.upstream.errors import RefreshError


def _row(info: ModelInfo, accounts: list[str]) -> dict[str, Any]:
    return {
        "id": info.public_id,
        "kiro_id": info.kiro_id,
        "display_name": info.display_name,
        "context_window": info.context_window,
        "max_output_tokens": info.max_output_tokens,
        "supports_images": info.supports_images,
        "accounts": accounts,
    }


async def list_models(request: web.Request) -> web.Response:
    """{"source": "accounts" | "static", "models": [...]}, in the accounts' listing order."""
    control = request.app[CONTROL]
    offered: dict[str, tuple[ModelInfo, list[str]]] = {}
    for record in await control.accounts.list():
        if record.status != "active":
            continue
        try:
            account = await control.keeper.fresh(to_upstream(record))
        except RefreshError:
            continue  # the account needs a login; `kiroctl status` says so
        catalog = await control.catalogs.get(account)
        for info in catalog:
            offered.setdefault(info.kiro_id, (info, []))[1].append(record.id)
    if not offered:
        rows = [_row(info, []) for info in STATIC_CATALOG]
        return web.json_response({"source": "static", "models": rows})
    rows = [_row(info, accounts) for info, accounts in offered.values()]
    return web.json_response({"source": "accounts", "models": rows})

"""Which models kirod serves: each account's catalog, and how a client's model name is resolved.

`CatalogCache` holds each account's ListAvailableModels answer (an hour), with the static catalog
as fallback. `ModelDirectory` is what both front ends ask: the public `/v1/models` and the control
API's `kiroctl models` list the same models from it, and dispatch resolves names through it, so an
alias or a family fallback means the same thing everywhere and is logged once per distinct name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.tokens import TokenKeeper
from kirod.canonical.models import (
    FAMILIES,
    STATIC_CATALOG,
    ModelCatalog,
    ModelInfo,
    ModelPolicy,
    Resolution,
    newest_of_family,
    resolve,
)
from kirod.canonical.models import catalog_from_list_available_models as parse_catalog
from kirod.storage.accounts import AccountStore
from kirod.tasks import SingleFlight, TaskOwner
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import RefreshError, UpstreamError

logger = logging.getLogger("kirod.models")

CATALOG_TTL_S = 3600.0
MAX_REMEMBERED_SUBSTITUTIONS = 256  # distinct client names logged and shown; bounded by design


class CatalogCache:
    """Each account's model catalog from ListAvailableModels, with the static list as fallback.

    `tasks` owns the fetches. Until every caller passes the daemon's owner, a private one is
    used (its fetches end with the event loop, as before).
    """

    def __init__(self, client: KiroClient, tasks: TaskOwner) -> None:
        self._client = client
        self._entries: dict[str, tuple[float, ModelCatalog]] = {}
        # One fetch per account however many requests find the catalog stale (a burst at start
        # would otherwise send one ListAvailableModels each).
        self._fetches: SingleFlight[str, ModelCatalog] = SingleFlight(tasks, "catalog")

    def cached(self, account_id: str) -> ModelCatalog | None:
        entry = self._entries.get(account_id)
        return entry[1] if entry else None

    async def get(self, account: UpstreamAccount) -> ModelCatalog:
        entry = self._entries.get(account.id)
        if entry is not None and time.monotonic() - entry[0] < CATALOG_TTL_S:
            return entry[1]
        return await self._fetches.do(account.id, lambda: self._fetch(account, entry))

    async def _fetch(
        self, account: UpstreamAccount, entry: tuple[float, ModelCatalog] | None
    ) -> ModelCatalog:
        try:
            catalog = parse_catalog(await self._client.list_models(account))
        except UpstreamError as exc:
            log.event(
                logger,
                "model_catalog_fallback",
                level=logging.WARNING,
                account=account.id,
                failure=exc.failure.value,
            )
            return entry[1] if entry else STATIC_CATALOG
        if len(catalog) == 0:
            catalog = STATIC_CATALOG
        self._entries[account.id] = (time.monotonic(), catalog)
        return catalog


@dataclass(frozen=True, slots=True)
class Offer:
    """One model and the active accounts that offer it (none: the static list)."""

    info: ModelInfo
    accounts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Offers:
    """What kirod serves now: `source` is "accounts", or "static" before any account answered."""

    source: str
    models: tuple[Offer, ...]

    @property
    def catalog(self) -> ModelCatalog:
        return ModelCatalog(tuple(offer.info for offer in self.models))


@dataclass(frozen=True, slots=True)
class Substitution:
    """A client name served by another model: by a configured alias or by family fallback."""

    requested: str
    served: str  # the Kiro id
    via: str


class ModelDirectory:
    def __init__(
        self,
        accounts: AccountStore,
        catalogs: CatalogCache,
        keeper: TokenKeeper,
        policy: ModelPolicy,
    ) -> None:
        self._accounts = accounts
        self._catalogs = catalogs
        self._keeper = keeper
        self.policy = policy
        self._seen: dict[tuple[str, str], Substitution] = {}

    async def catalog_for(self, account: UpstreamAccount) -> ModelCatalog:
        return await self._catalogs.get(account)

    def resolve(self, name: str, catalog: ModelCatalog) -> Resolution:
        """`name` on one account's catalog; a substitution is logged the first time it is made."""
        resolution = resolve(name, catalog, self.policy)
        if resolution.via != "exact":
            self._remember(name, resolution)
        return resolution

    def _remember(self, name: str, resolution: Resolution) -> None:
        key = (name, resolution.info.kiro_id)
        if key in self._seen or len(self._seen) >= MAX_REMEMBERED_SUBSTITUTIONS:
            return
        self._seen[key] = Substitution(name[:100], resolution.info.kiro_id, resolution.via)
        log.event(
            logger,
            "model_substituted",
            requested=name[:100],
            served=resolution.info.kiro_id,
            via=resolution.via,
        )

    def substitutions(self) -> tuple[Substitution, ...]:
        """Every substitution made since start (the first of each distinct name)."""
        return tuple(self._seen.values())

    def family_defaults(self, catalog: ModelCatalog) -> dict[str, str]:
        """`opus` / `sonnet` / `haiku` → the Kiro id each is served by now (family policy)."""
        if self.policy.fallback != "family":
            return {}
        out: dict[str, str] = {}
        for family in FAMILIES:
            if (info := newest_of_family(family, catalog)) is not None:
                out[family] = info.kiro_id
        return out

    async def offers(self) -> Offers:
        """Every active account's catalog (fetched when stale), or the static one if none."""
        offered: dict[str, tuple[ModelInfo, list[str]]] = {}
        for record in await self._accounts.list():
            if record.status != "active":
                continue
            try:
                account = await self._keeper.fresh(to_upstream(record))
            except RefreshError:
                continue  # the account needs a login; `kiroctl status` says so
            for info in await self._catalogs.get(account):
                offered.setdefault(info.kiro_id, (info, []))[1].append(record.id)
        if not offered:
            return Offers("static", tuple(Offer(info, ()) for info in STATIC_CATALOG))
        return Offers(
            "accounts",
            tuple(Offer(info, tuple(ids)) for info, ids in offered.values()),
        )

    def known(self, account_ids: Sequence[str]) -> ModelCatalog:
        """The union of the catalogs already fetched for these accounts; static if none."""
        seen: dict[str, ModelInfo] = {}
        for account_id in account_ids:
            for info in self._catalogs.cached(account_id) or ():
                seen.setdefault(info.kiro_id, info)
        return ModelCatalog(tuple(seen.values())) if seen else STATIC_CATALOG

    async def resolve_known(self, name: str) -> Resolution:
        """`name` against every account's catalog fetched so far (no upstream call)."""
        accounts = [record.id for record in await self._accounts.list()]
        return resolve(name, self.known(accounts), self.policy)

    async def check(self, name: object) -> None:
        """Raise the model's 404 when no account's known catalog can serve `name`.

        Called when a request is invalid anyway, so that a bad model is reported as such before
        the shape of the messages (no upstream call is made for it).
        """
        if isinstance(name, str) and name:
            await self.resolve_known(name)

"""Which models kirod serves: each account's catalog, and how a client's model name is resolved.

`CatalogCache` holds each account's ListAvailableModels answer (an hour), with the static catalog
as fallback. `ModelDirectory` is what both front ends ask: the public `/v1/models` and the control
API's `kiroctl models` list the same models from it, and dispatch resolves names through it, so an
alias or a family fallback means the same thing everywhere and is logged once per distinct name.

Routing by catalog: `ModelDirectory.route` resolves a request's model once, against every
account's cached catalog (plus the static one while some account has none cached yet, so a cold
start works), and answers which accounts may serve it: those whose cached catalog lists the
model, and those not read yet unless their plan cannot have it (no Opus on Free plans, as the
fake and kiro.rs have it). The pool leases only among those, so no lease and no upstream call is
spent on an account that lacks the model; a model no account offers is the 404 listing what is
available. An upstream `INVALID_MODEL_ID` drops the model from that account's cached catalog and
marks the catalog stale, so the next use reads it again; on an account no catalog was read for,
the model leaves that account's static fallback, and the attempt tries the name once more there.

Windows: the window an account really has for a model, where it is not the listed one, is learned
by `ModelDirectory.windows` (`kirod.accounts.windows`); routes carry it, and an offer's limit is
the smallest any of its accounts takes.

A model Kiro refused, or left out, is not struck from the account for good: Kiro limits models
by the region a request leaves from (no Claude model from mainland China or Hong Kong) and by an
organisation's policy (docs/KIRO-PROTOCOL.md §2.7), which change without the account changing.
A catalog due for a re-read (past its age, or read through another proxy than the account's now)
is not trusted to refuse a model: its account may serve what the static list names as well, and
the attempt that leases it reads the catalog first. A catalog a refusal marked stale is trusted
while another account offers the model, and stands in for an unread one when none does (so the
re-read says what is true now, and why). A catalog listing no Claude model is kept only
`GATED_CATALOG_TTL_S`: the models come back once the account's traffic leaves from elsewhere (its
proxy set, at once; the network changed, within minutes), without a restart.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.side_drift import observe_catalog
from kirod.accounts.tokens import TokenKeeper
from kirod.accounts.windows import WindowLearner
from kirod.canonical.catalog import (
    STATIC_CATALOG,
    STATIC_CATALOG_AS_OF,
    ModelCatalog,
    ModelInfo,
)
from kirod.canonical.catalog import catalog_from_list_available_models as parse_catalog
from kirod.canonical.client_models import CLIENT_MODELS
from kirod.canonical.context_window import prompt_limit
from kirod.canonical.model_names import parse_name
from kirod.canonical.resolution import (
    ModelPolicy,
    Resolution,
    claude_gated,
    line_defaults,
    lists_no_claude,
    resolve,
    unknown_model,
)
from kirod.errors import ApiError
from kirod.report_types import ClientModelRow
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.storage.windows import LearnedWindow
from kirod.tasks import SingleFlight, TaskOwner
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import RefreshError, UpstreamError

logger = logging.getLogger(__name__)

CATALOG_TTL_S = 3600.0
GATED_CATALOG_TTL_S = 300.0  # a catalog listing no Claude model: the region's gate may lift
STATIC_CATALOG_MAX_AGE_S = 180 * 86400.0  # after this the static fallback is likely out of date
MAX_REMEMBERED_SUBSTITUTIONS = 256  # distinct client names logged and shown; bounded by design
MAX_ROUTES = 64  # model names whose routing is kept (clients send a handful)


class CatalogCache:
    """Each account's model catalog from ListAvailableModels, with the static list as fallback.

    `tasks` owns the fetches. Until every caller passes the daemon's owner, a private one is
    used (its fetches end with the event loop, as before).
    """

    def __init__(
        self, client: KiroClient, tasks: TaskOwner, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._clock = clock  # a catalog's age, on a clock that only moves forward
        # account → (when read, on the monotonic clock; the catalog; the proxy it was read through)
        self._entries: dict[str, tuple[float, ModelCatalog, str | None]] = {}
        self._next_due = float("inf")  # the soonest an entry's age runs out (`due_passed`)
        self._stale: set[str] = set()  # accounts whose catalog a refusal marked for a re-read
        self._unreadable: set[str] = set()  # accounts whose last ListAvailableModels failed
        # Static-list models Kiro refused on accounts whose catalog was never read: without this
        # a one-account user whose ListAvailableModels fails is sent the same refused model (the
        # static list's newest Opus, say) on every request.
        self._refused_static: dict[str, frozenset[str]] = {}
        # One fetch per account however many requests find the catalog stale (a burst at start
        # would otherwise send one ListAvailableModels each).
        self._fetches: SingleFlight[str, ModelCatalog] = SingleFlight(tasks, "catalog")
        # (account, Kiro model) pairs that refused root additionalModelRequestFields
        # (docs/KIRO-PROTOCOL.md §2.6): the 4.5 generation, some external-IdP accounts. Kept until
        # kirod restarts (or the account is forgotten); bounded by accounts times models.
        self._no_request_fields: set[tuple[str, str]] = set()
        self.version = 0  # moves whenever a cached catalog changes (`ModelDirectory.route`)

    def cached(self, account_id: str) -> ModelCatalog | None:
        entry = self._entries.get(account_id)
        return entry[1] if entry else None

    def refused(self, account_id: str, kiro_id: str) -> None:
        """Kiro said INVALID_MODEL_ID for `kiro_id` on the account: drop it, re-read on next use
        (no catalog read yet: the account's static fallback leaves it out)."""
        entry = self._entries.get(account_id)
        if entry is not None:
            kept = ModelCatalog(tuple(info for info in entry[1] if info.kiro_id != kiro_id))
            self._entries[account_id] = (entry[0], kept, entry[2])
            self._stale.add(account_id)
            self.version += 1
        elif STATIC_CATALOG.get(kiro_id) is not None:  # bounded by the static list's size
            refused = self._refused_static.get(account_id, frozenset())
            self._refused_static[account_id] = refused | {kiro_id}
        log.event(logger, "model_catalog_refused", account=account_id, model=kiro_id)

    def due(self, account_id: str, proxy_url: str | None) -> bool:
        """The account has a cached catalog due for a re-read: past its age, or read through
        another proxy than `proxy_url` (the account's now)."""
        entry = self._entries.get(account_id)
        return entry is not None and not _current(entry, proxy_url, self._clock())

    def stale(self, account_id: str, proxy_url: str | None) -> bool:
        """`due`, or marked for a re-read by a refusal since it was read."""
        return account_id in self._stale or self.due(account_id, proxy_url)

    def due_passed(self) -> None:
        """Move `version` when a cached catalog's age ran out since the last look, so that a
        routing kept for it is made again (one clock read while none did)."""
        now = self._clock()
        if now < self._next_due:
            return
        self.version += 1
        later = (entry[0] + _ttl(entry[1]) for entry in self._entries.values())
        self._next_due = min((at for at in later if at > now), default=float("inf"))

    def request_fields_refused(self, account_id: str, kiro_id: str) -> None:
        """Kiro refused the root fields for `kiro_id` on the account: send them no more there."""
        if (account_id, kiro_id) in self._no_request_fields:
            return
        self._no_request_fields.add((account_id, kiro_id))
        log.event(
            logger,
            "request_fields_refused",
            level=logging.WARNING,
            account=account_id,
            model=kiro_id,
        )

    def takes_request_fields(self, account_id: str, kiro_id: str) -> bool:
        return (account_id, kiro_id) not in self._no_request_fields

    def forget(self, account_id: str) -> None:
        if self._entries.pop(account_id, None) is not None:
            self.version += 1
        self._stale.discard(account_id)
        self._no_request_fields = {k for k in self._no_request_fields if k[0] != account_id}
        self._unreadable.discard(account_id)
        self._refused_static.pop(account_id, None)

    def unavailable(self) -> bool:
        """Some account's catalog was asked for, and none could be read."""
        return not self._entries and bool(self._unreadable)

    async def get(self, account: UpstreamAccount) -> ModelCatalog:
        entry = self._entries.get(account.id)
        if entry is not None and not self.stale(account.id, account.proxy_url):
            return entry[1]
        return await self._fetches.do(account.id, lambda: self._fetch(account, entry))

    async def read(self, account: UpstreamAccount) -> ModelCatalog:
        """ListAvailableModels now, whatever is cached, and cached as any read (`kiroctl doctor
        --live`); a failure raises its `UpstreamError` instead of falling back."""
        return await self._fetch(account, self._entries.get(account.id), strict=True)

    async def _fetch(
        self,
        account: UpstreamAccount,
        entry: tuple[float, ModelCatalog, str | None] | None,
        *,
        strict: bool = False,
    ) -> ModelCatalog:
        try:
            pages = await self._client.list_models(account)
        except UpstreamError as exc:
            if strict:
                raise
            log.event(
                logger,
                "model_catalog_fallback",
                level=logging.WARNING,
                account=account.id,
                failure=exc.failure.value,
            )
            if entry is not None:
                return entry[1]
            self._unreadable.add(account.id)
            return self._fallback(account.id)
        catalog = parse_catalog(pages)
        observe_catalog(self._client.drift, account.region, pages)
        if len(catalog) == 0:
            catalog = STATIC_CATALOG
        self._unreadable.discard(account.id)
        self._refused_static.pop(account.id, None)
        self._stale.discard(account.id)
        read = self._clock()
        self._entries[account.id] = (read, catalog, account.proxy_url)
        self._next_due = min(self._next_due, read + _ttl(catalog))
        self.version += 1
        if lists_no_claude(catalog):
            log.event(logger, "model_catalog_without_claude", account=account.id)
        return catalog

    def _fallback(self, account_id: str) -> ModelCatalog:
        """The static list, less what Kiro refused on this account."""
        refused = self._refused_static.get(account_id)
        if not refused:
            return STATIC_CATALOG
        return ModelCatalog(tuple(info for info in STATIC_CATALOG if info.kiro_id not in refused))


def _ttl(catalog: ModelCatalog) -> float:
    """How long a catalog is trusted: shorter when it lists no Claude model (a gate that lifts
    when the account's traffic leaves from elsewhere)."""
    return GATED_CATALOG_TTL_S if lists_no_claude(catalog) else CATALOG_TTL_S


def _current(
    entry: tuple[float, ModelCatalog, str | None], proxy_url: str | None, now: float
) -> bool:
    return now - entry[0] < _ttl(entry[1]) and entry[2] == proxy_url


@dataclass(frozen=True, slots=True)
class Offer:
    """One model and the active accounts that offer it (none: the static list).

    Where an account's window for it was learned (`kirod.accounts.windows`), `info` has the
    prompt limit every offering account takes (the smallest), `learned` those windows, and
    `listed_window` the catalog's limit."""

    info: ModelInfo
    accounts: tuple[str, ...]
    learned: tuple[LearnedWindow, ...] = ()
    listed_window: int | None = None  # None: `info.context_window` is the listed one


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


@dataclass(frozen=True, slots=True)
class Routing:
    """A request's model, resolved across the accounts, and which accounts may serve it.

    `resolution` is None when only accounts whose catalog is not read yet may know the name:
    each of those resolves it on its own catalog once read.
    """

    resolution: Resolution | None
    offers: Callable[[AccountRecord], bool] | None  # None: every account may serve it

    @property
    def kiro_id(self) -> str | None:
        return self.resolution.info.kiro_id if self.resolution else None


def free_plan(record: AccountRecord) -> bool:
    """The account's last usage probe named a Free plan (`subscription` "KIRO FREE" etc.)."""
    subscription = (record.usage or {}).get("subscription")
    return isinstance(subscription, str) and "FREE" in subscription.upper()


def premium(kiro_id: str) -> bool:
    """Models Free plans do not get: Opus (docs/KIRO-PROTOCOL.md §2.7; kiro.rs skips it on FREE)."""
    name = parse_name(kiro_id)
    return name.vendor == "claude" and name.line == "opus"


class ModelDirectory:
    def __init__(
        self,
        accounts: AccountStore,
        catalogs: CatalogCache,
        keeper: TokenKeeper,
        policy: ModelPolicy,
        windows: WindowLearner | None = None,
    ) -> None:
        self._accounts = accounts
        self._catalogs = catalogs
        self._keeper = keeper
        self.policy = policy
        self.windows = windows or WindowLearner()  # the window each account really has
        self._seen: dict[tuple[str, str], Substitution] = {}
        # name → (catalog version, the records routed over, the routing): a request's routing
        # is the last one's until an account record or a catalog changes.
        self._routes: dict[str, tuple[int, tuple[AccountRecord, ...], Routing]] = {}

    async def catalog_for(self, account: UpstreamAccount) -> ModelCatalog:
        return await self._catalogs.get(account)

    async def read_catalog(self, account: UpstreamAccount) -> ModelCatalog:
        """The account's catalog read from Kiro now; raises the read's `UpstreamError`."""
        return await self._catalogs.read(account)

    def refused(self, account_id: str, kiro_id: str) -> None:
        """Kiro refused the model on this account (INVALID_MODEL_ID): route elsewhere."""
        self._catalogs.refused(account_id, kiro_id)

    def limited(self, account_id: str, kiro_id: str) -> bool:
        """Kiro refusing `kiro_id` on the account is its region's or a policy's doing, not the
        plan's: its catalog listed the model, or lists no Claude model and this is one."""
        catalog = self._catalogs.cached(account_id)
        if catalog is None:
            return False
        return catalog.get(kiro_id) is not None or claude_gated(kiro_id, catalog)

    def request_fields_refused(self, account_id: str, kiro_id: str) -> None:
        """Kiro refused the model's root request fields on this account (docs/KIRO-PROTOCOL.md
        §2.6): later requests there go without them."""
        self._catalogs.request_fields_refused(account_id, kiro_id)

    def takes_request_fields(self, account_id: str, kiro_id: str) -> bool:
        return self._catalogs.takes_request_fields(account_id, kiro_id)

    def catalog_read(self, account_id: str) -> bool:
        """Has ListAvailableModels answered for the account (else the static list stands in)."""
        return self._catalogs.cached(account_id) is not None

    def offered_by(self, record: AccountRecord, kiro_id: str, *, stale: bool = False) -> bool:
        """May the account serve `kiro_id`: its cached catalog lists it, or (none cached yet, or
        the one cached is due for a re-read; with `stale`, also one a refusal marked) its plan
        does not rule it out."""
        catalog = self._catalogs.cached(record.id)
        if catalog is not None and catalog.get(kiro_id) is not None:
            return True
        reread = self._catalogs.stale if stale else self._catalogs.due
        if catalog is not None and not reread(record.id, record.proxy_url):
            return False
        return not (premium(kiro_id) and free_plan(record))

    def route(self, name: str, records: Sequence[AccountRecord]) -> Routing:
        """Resolve `name` across the accounts' catalogs; raise the 404 when none offers it.

        Kept per name while the records (the pool's objects, replaced whenever a row changes)
        and the cached catalogs stay the same: the union of every account's catalog is then the
        same, and so is the answer.
        """
        self._catalogs.due_passed()
        kept = self._routes.get(name)
        version = self._catalogs.version
        if (
            kept is not None
            and kept[0] == version
            and len(kept[1]) == len(records)
            and all(old is new for old, new in zip(kept[1], records, strict=True))
        ):
            return kept[2]
        routing = self._route(name, records)
        if len(self._routes) >= MAX_ROUTES:
            self._routes.clear()
        self._routes[name] = (version, tuple(records), routing)
        return routing

    def _route(self, name: str, records: Sequence[AccountRecord]) -> Routing:
        seen: dict[str, ModelInfo] = {}
        cold = not records
        for record in records:
            catalog = self._catalogs.cached(record.id)
            if catalog is None or self._catalogs.due(record.id, record.proxy_url):
                cold = True  # may serve what the static list names, once read again
            if catalog is None:
                continue
            for info in catalog:
                seen.setdefault(info.kiro_id, info)
        union = ModelCatalog(tuple(seen.values()))
        stale = False
        try:
            # What the accounts read so far list wins; an account not read yet may have any
            # model the static list names (dispatch resolves again on its own catalog then).
            resolution = resolve(name, union if seen else STATIC_CATALOG, self.policy)
        except ApiError:
            # None offers it: a catalog a refusal marked stands in for an unread one.
            stale = any(self._catalogs.stale(r.id, r.proxy_url) for r in records)
            if not (cold or stale):
                raise
            for info in STATIC_CATALOG:
                seen.setdefault(info.kiro_id, info)
            union = ModelCatalog(tuple(seen.values()))
            try:
                resolution = resolve(name, union, self.policy)
            except ApiError:
                # A name nothing read so far knows: only an account not read yet may list it.
                return Routing(None, self._unread)
        kiro_id = resolution.info.kiro_id

        def offers(record: AccountRecord) -> bool:
            return self.offered_by(record, kiro_id, stale=stale)

        offering = [offers(record) for record in records]
        if records and not any(offering):
            # Only accounts not read yet listed it, and their plans cannot have it.
            available = [i for i in union if any(self.offered_by(r, i.kiro_id) for r in records)]
            raise unknown_model(name, ModelCatalog(tuple(available)))
        # The usual case, every account offering it, leaves the pool's queue unfiltered: a
        # filter makes each waiter a selective one, checked against every account per release.
        return Routing(resolution, None if all(offering) else offers)

    def _unread(self, record: AccountRecord) -> bool:
        """No catalog of the account is cached, or the one cached is to be read again."""
        cached = self._catalogs.cached(record.id) is not None
        return not cached or self._catalogs.stale(record.id, record.proxy_url)

    def catalog_unavailable(self, now: float | None = None) -> bool:
        """No account's catalog could be read, and the static fallback is out of date."""
        wall = time.time() if now is None else now
        stale = wall - STATIC_CATALOG_AS_OF > STATIC_CATALOG_MAX_AGE_S
        return stale and self._catalogs.unavailable()

    def resolve(self, name: str, catalog: ModelCatalog) -> Resolution:
        """`name` on one account's catalog; a substitution is logged the first time it is made."""
        resolution = resolve(name, catalog, self.policy)
        self.served(name, resolution)
        return resolution

    def lookup(self, name: str, catalog: ModelCatalog) -> Resolution:
        """`name` on `catalog` without recording a substitution: nothing is served by it."""
        return resolve(name, catalog, self.policy)

    def served(self, name: str, resolution: Resolution) -> None:
        """`name` is served by `resolution`: a substitution is logged the first time it is made."""
        if resolution.via != "exact":
            self._remember(name, resolution)

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
        """Each Claude line word offered (`opus`, `fable`) → the Kiro id it is served by now."""
        return line_defaults(catalog) if self.policy.fallback == "family" else {}

    def client_defaults(self, catalog: ModelCatalog) -> tuple[ClientModelRow, ...]:
        """What serves each id the supported clients send by default, and why (`kiroctl models`).

        Looked up, not resolved: nothing is served, so no substitution is recorded.
        """
        rows = []
        for asked in CLIENT_MODELS:
            served: str | None = None
            via: str | None = None
            try:
                resolution = self.lookup(asked.id, catalog)
            except ApiError:
                why = "no account offers a model of its kind"
            else:
                served, via, why = resolution.info.kiro_id, resolution.via, resolution.why
            rows.append(ClientModelRow(asked.client, asked.role, asked.id, served, via, why))
        return tuple(rows)

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
            tuple(self._windowed(info, tuple(ids)) for info, ids in offered.values()),
        )

    def _windowed(self, info: ModelInfo, accounts: tuple[str, ...]) -> Offer:
        """The offer with the windows learned on its accounts: a client that budgets by its
        limit fits on whichever of them serves it."""
        windows = [self.windows.window(account, info.kiro_id) for account in accounts]
        if not any(windows):
            return Offer(info, accounts)
        limit = min(info.context_window if w is None else prompt_limit(info, w) for w in windows)
        learned = tuple(
            w
            for w in self.windows.learned()
            if w.kiro_id == info.kiro_id and w.account_id in accounts
        )
        windowed = dataclasses.replace(info, context_window=limit)
        return Offer(windowed, accounts, learned, info.context_window)

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

"""Profile discovery (docs/UPSTREAM.md §5.3) and the `needs_profile` state.

An IdC, Builder ID or external-IdP login carries no profile ARN, yet Kiro wants one on every
chat. `discover` asks `ListAvailableProfiles` in the account's mapped API region, then in the
other one (profiles are regional: a 403 in one region only means "none here"); a `ksk_` API key
asks `GetProfile` instead. Exactly one profile: the account uses it, in that profile's region.
Several: kirod cannot choose, so the account waits in `needs_profile` until
`kiroctl accounts set-profile` names one.

Discovery runs at import. When it could not (the imported token had expired, Kiro was not
reachable), or when Kiro later answers "profileArn is required", the maintenance loop runs it
again through `ProfileFinder`, after refreshing the token, at most once per `RETRY_S`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kirod import log
from kirod.accounts.account import to_upstream
from kirod.accounts.tokens import TokenKeeper
from kirod.credentials.regions import (
    API_REGIONS,
    PROFILE_ARN,
    api_region,
    other_regions,
    profile_region,
)
from kirod.storage.accounts import AccountRecord, AccountState, AccountStore
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamError
from kirod.upstream.secrets import AuthKind

logger = logging.getLogger(__name__)

RETRY_S = 600.0
"""How soon maintenance asks Kiro again for the profiles of an account that still has none."""


@dataclass(frozen=True)
class Discovery:
    """The profiles found, in probe order; `answered` is False when no region answered."""

    profiles: tuple[str, ...]
    answered: bool

    @property
    def only(self) -> str | None:
        return self.profiles[0] if len(self.profiles) == 1 else None


async def discover(client: KiroClient, account: UpstreamAccount) -> Discovery:
    """Every profile the account may use, probing its region first, then the other one. A
    `ksk_` API key may not list profiles, so it asks for its own (GetProfile) instead."""
    found: list[str] = []
    answered = False
    for region in other_regions(account.region):
        try:
            if account.auth_kind is AuthKind.API_KEY:
                own = await client.get_profile(account, region)
                listed = [own] if own is not None else []
            else:
                listed = await client.list_profiles(account, region)
        except UpstreamError as exc:
            log.event(
                logger,
                "profile_discovery_failed",
                level=logging.INFO,
                region=region,
                failure=exc.failure.value,
            )
            continue
        answered = True
        for item in listed:
            arn = item.get("arn")
            if not isinstance(arn, str) or PROFILE_ARN.fullmatch(arn) is None:
                continue
            if profile_region(arn) in API_REGIONS and arn not in found:
                found.append(arn)
        if found and account.auth_kind is AuthKind.API_KEY:
            break  # a key has exactly one profile
    return Discovery(profiles=tuple(found), answered=answered)


def needs_profile_reason(discovery: Discovery, account_id: str) -> str:
    shown = ", ".join(discovery.profiles[:5]) + (" …" if len(discovery.profiles) > 5 else "")
    return (
        f"Kiro offers {len(discovery.profiles)} profiles ({shown}); choose one with "
        f"'kiroctl accounts set-profile {account_id} ARN'"
    )


def waiting_for_profile(reason: str) -> Callable[[AccountRecord], AccountState]:
    """The `update_state` decision putting an account in `needs_profile`."""

    def decide(record: AccountRecord) -> AccountState:
        return dataclasses.replace(record.state, status="needs_profile", reason=reason, until=None)

    return decide


class ProfileFinder:
    """Discovery for stored accounts: those without a profile, and those in `needs_profile`."""

    def __init__(
        self,
        store: AccountStore,
        client: KiroClient,
        keeper: TokenKeeper,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._client = client
        self._keeper = keeper
        self._clock = clock
        self._tried: dict[str, float] = {}

    def due(self, record: AccountRecord) -> bool:
        if record.profile_arn is not None and record.status != "needs_profile":
            return False
        tried = self._tried.get(record.id)
        return tried is None or self._clock() - tried >= RETRY_S

    def forget_others(self, known: set[str]) -> None:
        self._tried = {key: at for key, at in self._tried.items() if key in known}

    async def find(self, record: AccountRecord) -> AccountRecord:
        """Discover with a fresh token and store the answer: the one profile (the account is
        active again), or `needs_profile` naming several. Raises what refreshing raised."""
        self._tried[record.id] = self._clock()
        account = await self._keeper.fresh(to_upstream(record))
        discovery = await discover(self._client, dataclasses.replace(account, profile_arn=None))
        log.event(
            logger,
            "profile_rediscovered",
            account=record.id,
            profiles=len(discovery.profiles),
            answered=discovery.answered,
        )
        updated: AccountRecord | None = None
        if (arn := discovery.only) is not None:
            updated = await self._store.set_profile(
                record.id, arn, api_region(arn, record.auth_region)
            )
        elif discovery.profiles:
            reason = needs_profile_reason(discovery, record.id)
            updated = await self._store.update_state(record.id, waiting_for_profile(reason))
        return updated or record

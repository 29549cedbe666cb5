"""Profile discovery at import (capabilities §5.3) and the `needs_profile` state.

An IdC, Builder ID or external-IdP login carries no profile ARN, yet Kiro wants one on every
chat. `discover` asks `ListAvailableProfiles` in the account's mapped API region, then in the
other one (profiles are regional: a 403 in one region only means "none here"). Exactly one
profile: the account uses it, in that profile's region. Several: kirod cannot choose, so the
account waits in `needs_profile` until `kiroctl accounts set-profile` names one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kirod import log
from kirod.storage.accounts import AccountRecord, AccountState
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import UpstreamError
from kirod.upstream.regions import API_REGIONS, PROFILE_ARN, other_regions, profile_region

logger = logging.getLogger("kirod.accounts")


@dataclass(frozen=True)
class Discovery:
    """The profiles found, in probe order; `answered` is False when no region answered."""

    profiles: tuple[str, ...]
    answered: bool

    @property
    def only(self) -> str | None:
        return self.profiles[0] if len(self.profiles) == 1 else None


async def discover(client: KiroClient, account: UpstreamAccount) -> Discovery:
    """Every profile the account may use, probing its region first, then the other one."""
    found: list[str] = []
    answered = False
    for region in other_regions(account.region):
        try:
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

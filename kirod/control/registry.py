"""The accounts as the control plane manages them: list, import, remove, enable, disable, refresh,
probe, overage. `kirod.localapi` parses a request, makes one call here, and answers its JSON.

An import of a login kirod already holds updates that account's credentials instead of adding a
duplicate. Removing an account also closes its upstream connections. Failures are raised as the
control plane's `ControlError`s; secrets never leave this module's callers' process.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kirod import log
from kirod.accounts import profiles
from kirod.accounts.health import current_status
from kirod.accounts.maintenance import Maintenance
from kirod.accounts.pool import AccountPool
from kirod.budgets.budgets import Budgets, account_limits
from kirod.credentials import refresh as auth
from kirod.credentials.importers import ImportedAccount, ImportLimits, parse_api_key, parse_upload
from kirod.credentials.refresh import registration_expired
from kirod.credentials.regions import RegionError, api_region
from kirod.errors import (
    ControlError,
    ControlNotFound,
    ControlUpstreamFailed,
    InvalidControlRequest,
)
from kirod.report_types import AccountCounts
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import CredentialImportError, Failure, RefreshError, UpstreamError
from kirod.upstream.proxies import ProxyUrlError, check_proxy_url
from kirod.upstream.secrets import Credentials

logger = logging.getLogger(__name__)

Operation = Callable[[str], Awaitable[AccountRecord | None]]


def _same_login(record: AccountRecord, imported: ImportedAccount) -> bool:
    """An import of a login we already hold updates it instead of adding a duplicate."""
    stored = Credentials.from_json(record.credentials)
    new = imported.credentials
    if new.refresh_token:
        return stored.refresh_token == new.refresh_token
    return record.auth_kind == imported.auth_kind.value and (
        stored.access_token == new.access_token
    )


def shown(record: AccountRecord, now: float, budgets: Budgets | None = None) -> dict[str, Any]:
    """An account as the control API shows it: no secrets, its status as of now, its budget."""
    out = record.redacted()
    if budgets is not None:
        out["budget"] = budgets.report("account", record.id, account_limits(record)).to_json()
    out["registration_expired"] = registration_expired(
        Credentials.from_json(record.credentials), now
    )
    status = current_status(record.status, record.status_until, now)
    if status != record.status:
        out.update(
            status=status,
            status_reason="cool-down over; the next request tests the account",
            status_until=None,
        )
    return out


class AccountRegistry:
    def __init__(
        self,
        pool: AccountPool,
        maintenance: Maintenance,
        client: KiroClient,
        limits: ImportLimits,
        budgets: Budgets | None = None,
    ) -> None:
        self._pool = pool
        self._maintenance = maintenance
        self._client = client
        self._limits = limits
        self._budgets = budgets

    @property
    def _store(self) -> AccountStore:
        return self._pool.store

    async def all(self) -> list[dict[str, Any]]:
        now = time.time()
        return [shown(record, now, self._budgets) for record in await self._store.list()]

    async def get(self, account_id: str) -> dict[str, Any]:
        record = await self._store.get(account_id)
        if record is None:
            raise ControlNotFound("account")
        return shown(record, time.time(), self._budgets)

    async def set_budget(
        self, account_id: str, *, day: float | None, month: float | None, allow_overage: bool
    ) -> dict[str, Any]:
        """Set the account's credit ceilings and overage permission. A rest they no longer
        call for ends; one they now call for begins."""
        record = await self._store.set_budget(
            account_id, day=day, month=month, allow_overage=allow_overage
        )
        if record is None:
            raise ControlNotFound("account")
        record = await self._pool.budget_changed(account_id) or record
        rest = self._budgets.rest(record) if self._budgets is not None else None
        if rest is not None:
            record = (
                await self._pool.rest_for_budget(account_id, rest.period, rest.limit, rest.until)
                or record
            )
        log.event(
            logger,
            "account_budget_set",
            account=account_id,
            per_day=day,
            per_month=month,
            allow_overage=allow_overage,
        )
        return shown(record, time.time(), self._budgets)

    async def counts(self) -> AccountCounts:
        """How many accounts there are, and in which state as of now."""
        records = await self._store.list()
        now = time.time()
        by_status = collections.Counter[str](
            current_status(record.status, record.status_until, now) for record in records
        )
        return AccountCounts(
            total=len(records), usable=by_status["active"], by_status=dict(by_status)
        )

    async def import_upload(
        self, content: bytes, companion: bytes | None, label: str | None
    ) -> list[dict[str, Any]]:
        """Import the accounts of a credential file saved by another Kiro tool."""
        try:
            imported = await parse_upload(content, companion, self._limits)
        except CredentialImportError as exc:
            raise InvalidControlRequest(str(exc), "invalid_import") from None
        return await self._store_all(imported, label)

    async def import_api_key(self, key: str, label: str | None) -> list[dict[str, Any]]:
        try:
            imported = [parse_api_key(key)]
        except CredentialImportError as exc:
            raise InvalidControlRequest(str(exc), "invalid_import") from None
        return await self._store_all(imported, label)

    async def _store_all(
        self, imported: list[ImportedAccount], label: str | None
    ) -> list[dict[str, Any]]:
        self._store.check_room()  # before the profile discovery asks Kiro
        results = []
        for item in imported:
            if label and len(imported) == 1:
                item = dataclasses.replace(item, label=label)
            record, created = await self._store_one(item)
            self._maintenance.welcome(record.id)
            log.event(
                logger,
                "account_imported",
                account=record.id,
                source=item.source,
                auth_kind=item.auth_kind.value,
                created=created,
            )
            results.append({**record.redacted(), "created": created})
        return results

    async def _store_one(self, imported: ImportedAccount) -> tuple[AccountRecord, bool]:
        """Insert `imported`, or refresh the credentials of the account it duplicates."""
        for record in await self._store.list():
            if _same_login(record, imported):
                updated = await self._store.update_credentials(
                    record.id, imported.credentials.to_json(), expected_generation=record.generation
                )
                return updated, False
        imported, discovery = await self._discover_profile(imported)
        record = await self._store.insert(
            label=imported.label,
            auth_kind=imported.auth_kind.value,
            region=imported.region,
            auth_region=imported.auth_region,
            credentials=imported.credentials.to_json(),
            profile_arn=imported.profile_arn,
        )
        if discovery is not None and len(discovery.profiles) > 1:
            reason = profiles.needs_profile_reason(discovery, record.id)
            record = (
                await self._store.update_state(record.id, profiles.waiting_for_profile(reason))
                or record
            )
        return record, True

    async def _discover_profile(
        self, imported: ImportedAccount
    ) -> tuple[ImportedAccount, profiles.Discovery | None]:
        """A login without a profile ARN (IdC, external IdP) asks Kiro for its profiles; with
        exactly one, the account uses it, in that profile's region."""
        if imported.profile_arn is not None:
            return imported, None
        if auth.needs_refresh(imported.credentials, 0.0, time.time()):
            # An expired token would only be refused: maintenance refreshes it and then asks.
            return imported, None
        owner = f"import-{id(imported):x}"
        account = UpstreamAccount(
            id=owner,
            region=imported.region,
            auth_region=imported.auth_region,
            auth_kind=imported.auth_kind,
            profile_arn=None,
            credentials=imported.credentials,
        )
        try:
            discovery = await profiles.discover(self._client, account)
        finally:
            await self._client.forget_account(owner)
        if (arn := discovery.only) is not None:
            imported = dataclasses.replace(
                imported, profile_arn=arn, region=api_region(arn, imported.auth_region)
            )
        log.event(
            logger,
            "profile_discovered",
            auth_kind=imported.auth_kind.value,
            profiles=len(discovery.profiles),
            answered=discovery.answered,
        )
        return imported, discovery

    async def set_profile(self, account_id: str, profile_arn: str) -> dict[str, Any]:
        """Give the account the Kiro profile to use (and so its API region); ends
        `needs_profile`. Raises `InvalidControlRequest` for an ARN kirod cannot use."""
        try:
            region = api_region(profile_arn.strip(), None)
        except RegionError as exc:
            raise InvalidControlRequest(str(exc), "invalid_profile") from None
        record = await self._store.set_profile(account_id, profile_arn.strip(), region)
        if record is None:
            raise ControlNotFound("account")
        log.event(logger, "account_profile_set", account=account_id, region=region)
        return shown(record, time.time())

    async def remove(self, account_id: str) -> None:
        """Remove the account and close its upstream connections."""
        removed = await self._store.remove(account_id)
        await self._client.forget_account(account_id)
        if not removed:
            raise ControlNotFound("account")
        if self._budgets is not None:
            self._budgets.forget("account", account_id)
        log.event(logger, "account_removed", account=account_id)

    async def enable(self, account_id: str) -> dict[str, Any]:
        """Back in service with a clean slate, whatever its state but `needs_profile`: without
        a profile Kiro accepts, the account would only fail again."""
        record = await self._store.get(account_id)
        if record is not None and record.status == "needs_profile":
            raise InvalidControlRequest(
                "the account needs a profile first: choose one with "
                f"'kiroctl accounts set-profile {account_id} ARN'",
                "needs_profile",
            )
        return await self._operate(account_id, "enabled", self._pool.enable)

    async def disable(self, account_id: str) -> dict[str, Any]:
        """No new requests; those in flight finish."""
        return await self._operate(account_id, "disabled", self._pool.disable)

    async def set_proxy(self, account_id: str, proxy_url: str | None) -> dict[str, Any]:
        """Route the account's upstream traffic through `proxy_url` (`direct`: no proxy, even
        when a global one is set; None: the global `proxy_url` setting) from its next call on.

        Raises `InvalidControlRequest` for a URL kirod cannot use.
        """
        if proxy_url is not None:
            try:
                proxy_url = check_proxy_url(proxy_url)
            except ProxyUrlError as exc:
                raise InvalidControlRequest(str(exc), "invalid_proxy") from None
        record = await self._store.set_proxy(account_id, proxy_url)
        if record is None:
            raise ControlNotFound("account")
        shown_proxy = record.redacted()["proxy_url"]
        log.event(logger, "account_proxy_set", account=account_id, proxy=shown_proxy or "global")
        return shown(record, time.time())

    async def refresh(self, account_id: str) -> dict[str, Any]:
        """Refresh the access token now."""
        return await self._operate(account_id, "refreshed", self._maintenance.refresh_now)

    async def probe(self, account_id: str) -> dict[str, Any]:
        """Read the usage limits now and store them."""
        return await self._operate(account_id, "probed", self._maintenance.probe_usage)

    async def set_overage(self, account_id: str, enabled: bool) -> dict[str, Any]:
        """Turn overage on or off at Kiro (docs/KIRO-PROTOCOL.md §6.5), then read the usage back.

        Kiro's 403 (a plan without overage, such as Free) is the `overage_unavailable` refusal.
        """
        try:
            record = await self._maintenance.set_overage(account_id, enabled)
        except RefreshError as exc:
            raise ControlUpstreamFailed("refresh_failed", str(exc)) from None
        except UpstreamError as exc:
            if exc.failure is Failure.FORBIDDEN:
                raise await self._overage_refused(account_id) from None
            raise ControlUpstreamFailed(
                "upstream_failed", f"Kiro did not answer the overage change: {exc}"
            ) from None
        if record is None:
            raise ControlNotFound("account")
        return shown(record, time.time())

    async def _overage_refused(self, account_id: str) -> ControlError:
        """Kiro says only 403; the last probe says whether the plan is why."""
        record = await self._store.get(account_id)
        usage = record.usage if record is not None and record.usage else {}
        plan = usage.get("subscription")
        log.event(logger, "overage_refused", account=account_id, plan=plan)
        if usage.get("overage_capable") is True:
            message = "Kiro refused to change this account's overage (403)"
        else:
            message = f"this account's plan{f' ({plan})' if plan else ''} cannot use overage"
        return ControlError(403, "overage_unavailable", message)

    async def _operate(self, account_id: str, name: str, operation: Operation) -> dict[str, Any]:
        try:
            record = await operation(account_id)
        except RefreshError as exc:
            raise ControlUpstreamFailed("refresh_failed", str(exc)) from None
        except UpstreamError as exc:
            raise ControlUpstreamFailed(
                "upstream_failed", f"Kiro did not answer the {name}: {exc}"
            ) from None
        if record is None:
            raise ControlNotFound("account")
        log.event(logger, f"account_{name}", account=account_id)
        return record.redacted()

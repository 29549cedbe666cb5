"""The daemon's part of `kiroctl doctor` (`GET /doctor`): its versions, what is wrong with its
settings now, and whether each Kiro endpoint its accounts use answers through their proxies.

Reachability is checked concurrently (`MAX_CHECKS` at once), each endpoint and proxy pair once,
each bounded by `CHECK_TIMEOUT_S` and all by `TOTAL_TIMEOUT_S`, whatever the accounts.
Nothing here touches the operation log or any table that grows.
"""

from __future__ import annotations

import asyncio
import collections
import os
import platform
import ssl
import sys

from kirod import __version__
from kirod.config import Settings, unknown_env
from kirod.credentials.regions import DEFAULT_API_REGION
from kirod.report_types import Doctor, Reach
from kirod.storage.accounts import AccountStore
from kirod.upstream.client import KiroClient
from kirod.upstream.reach import reach

CHECK_TIMEOUT_S = 5.0
MAX_CHECKS = 8
# The whole route's bound (kiroctl waits 30 s): checks started late get what is left of it.
TOTAL_TIMEOUT_S = 15.0
MIN_CHECK_S = 0.5
# What each login kind refreshes its token at (kirod.credentials.refresh).
_SOCIAL = "social"
_OIDC = ("builder_id", "idc")


def config_problems(settings: Settings, started: float) -> list[str]:
    """What the daemon knows is wrong with its settings now, each with its fix."""
    problems = []
    for name, closest in unknown_env():
        guess = f" (did you mean {closest}?)" if closest else ""
        problems.append(f"the environment variable {name} sets nothing{guess}: rename or unset it")
    path = settings.config_path
    if path is not None:
        try:
            changed = os.stat(path).st_mtime > started
        except OSError:
            problems.append(f"the config file {path} is gone since kirod started")
        else:
            if changed:
                problems.append(
                    f"the config file {path} changed since kirod started: restart kirod to apply it"
                )
    if settings.ca_file is not None:
        try:
            ssl.create_default_context().load_verify_locations(cafile=settings.ca_file)
        except (OSError, ssl.SSLError):
            problems.append(
                f"ca_file {settings.ca_file} no longer loads: kirod keeps what it loaded at start, "
                "a restart would fail"
            )
    return problems


class DoctorReports:
    def __init__(
        self, settings: Settings, accounts: AccountStore, client: KiroClient, started: float
    ) -> None:
        self._settings = settings
        self._accounts = accounts
        self._client = client
        self._started = started

    async def run(self) -> Doctor:
        targets = await self._targets()
        gate = asyncio.Semaphore(MAX_CHECKS)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TOTAL_TIMEOUT_S

        async def check(key: tuple[str, str, str, str | None], count: int) -> Reach:
            target, region, url, proxy_url = key
            async with gate:
                # However many endpoints and proxies, the answer comes within TOTAL_TIMEOUT_S.
                left = max(MIN_CHECK_S, min(CHECK_TIMEOUT_S, deadline - loop.time()))
                return await reach(
                    self._client,
                    target=target,
                    region=region,
                    url=url,
                    proxy_url=proxy_url,
                    accounts=count,
                    timeout_s=left,
                )

        checked = await asyncio.gather(*(check(key, n) for key, n in targets.items()))
        return Doctor(
            version=__version__,
            python=platform.python_version(),
            platform=f"{sys.platform} {platform.machine()}",
            config=tuple(config_problems(self._settings, self._started)),
            reach=tuple(checked),
        )

    async def _targets(self) -> collections.Counter[tuple[str, str, str, str | None]]:
        """(target, region, URL, the account's proxy setting) → how many accounts use it; with
        no account, the API in the region a first login gets."""
        endpoints = self._client.endpoints
        targets = collections.Counter[tuple[str, str, str, str | None]]()
        for record in await self._accounts.list():
            if record.status == "disabled":
                continue
            proxy = record.proxy_url
            targets["kiro", record.region, endpoints.kiro_url(record.region), proxy] += 1
            if record.auth_kind == _SOCIAL:
                auth = endpoints.auth_url(record.auth_region)
                targets["auth", record.auth_region, auth, proxy] += 1
            elif record.auth_kind in _OIDC:
                oidc = endpoints.oidc_url(record.auth_region)
                targets["auth", record.auth_region, oidc, proxy] += 1
        if not targets:
            region = DEFAULT_API_REGION
            targets["kiro", region, endpoints.kiro_url(region), None] = 0
        return targets

"""Device-code logins driven by the daemon, so kiroctl only shows a code and polls for the end.

Each login is an owned task polling AWS SSO OIDC at the interval the service asks for (longer
after `slow_down`) until the user approves, denies, or the code expires. An approved login is
stored as a new account, labelled with the e-mail address its usage limits report. Finished logins
are kept a while for their poller, then forgotten. The device code and client secret never leave
this module. The control plane calls `start`, `get`, `wait` and `cancel`; each answers a `Login`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kirod import log
from kirod.accounts import profiles
from kirod.credentials import device_login as device
from kirod.credentials.regions import RegionError, api_region, mapped_api_region
from kirod.errors import ControlUpstreamFailed, InvalidControlRequest, StoreError, TooManyLogins
from kirod.report_types import Login
from kirod.storage.accounts import AccountStore
from kirod.tasks import TaskOwner
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import LoginError, UpstreamError
from kirod.upstream.proxies import ProxyUrlError, check_proxy_url
from kirod.upstream.secrets import AuthKind, Credentials
from kirod.upstream.usage import UsageSnapshot, parse_usage_limits

logger = logging.getLogger(__name__)

KEEP_FINISHED_S = 600.0
MAX_PENDING = 8
MAX_WAIT_S = 30.0
_STATES = {"access_denied": "denied", "expired_token": "expired"}
_KIND_NAMES = {AuthKind.BUILDER_ID: "Builder ID", AuthKind.IDC: "IAM Identity Center"}


@dataclass
class _Session:
    id: str
    device: device.DeviceLogin
    state: str = Login.PENDING
    account: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    finished_at: float | None = None
    storing: bool = False  # approved and being stored: too late to cancel
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def view(self) -> Login:
        login = self.device
        return Login(
            id=self.id,
            state=self.state,
            auth_kind=login.auth_kind.value,
            start_url=login.start_url,
            region=login.region,
            user_code=login.user_code,
            verification_uri=login.verification_uri,
            verification_uri_complete=login.verification_uri_complete,
            expires_at=login.expires_at,
            interval_s=login.interval_s,
            account=self.account,
            error=self.error,
        )

    def finish(self, state: str, error: tuple[str, str] | None = None) -> None:
        self.state = state
        self.error = {"code": error[0], "message": error[1]} if error else None
        self.finished_at = time.monotonic()
        self.done.set()


class Logins:
    def __init__(
        self,
        client: KiroClient,
        store: AccountStore,
        tasks: TaskOwner,
        *,
        on_added: Callable[[str], None] = lambda account_id: None,
    ) -> None:
        """`on_added(account_id)` is told of each account a login stored."""
        self._client = client
        self._store = store
        self._tasks = tasks
        self._on_added = on_added
        self._sessions: dict[str, _Session] = {}

    async def start(
        self, *, start_url: str | None, region: str | None, proxy_url: str | None = None
    ) -> Login:
        """Register a client and get a device code.

        `proxy_url`: the new account's own proxy (a URL or `direct`; None: the global one), for
        the login's calls and the account's afterwards. Raises `InvalidControlRequest` for one
        kirod cannot use.

        Raises `TooManyLogins` when MAX_PENDING logins wait, `ControlUpstreamFailed` when AWS
        refuses or cannot be reached.
        """
        try:  # an IdC region without a Kiro API host is refused now, not as a DNS error later
            mapped_api_region(region or device.DEFAULT_REGION)
        except RegionError as exc:
            raise InvalidControlRequest(str(exc), "invalid_region") from None
        if proxy_url is not None:
            try:
                proxy_url = check_proxy_url(proxy_url)
            except ProxyUrlError as exc:
                raise InvalidControlRequest(str(exc), "invalid_proxy") from None
        self._forget_old()
        if sum(not s.done.is_set() for s in self._sessions.values()) >= MAX_PENDING:
            raise TooManyLogins
        self._store.check_room()  # a login exists to store an account: not while it cannot
        try:
            started = await device.start(
                self._client,
                start_url=start_url or device.BUILDER_ID_START_URL,
                region=region or device.DEFAULT_REGION,
                proxy_url=proxy_url,
            )
        except LoginError as exc:
            raise ControlUpstreamFailed("login_failed", str(exc)) from None
        session = _Session(id="login_" + secrets.token_hex(8), device=started)
        self._sessions[session.id] = session
        session.task = self._tasks.spawn(self._drive(session), name=f"login:{session.id}")
        log.event(logger, "login_started", login=session.id, auth_kind=started.auth_kind.value)
        return session.view()

    def get(self, login_id: str) -> Login | None:
        session = self._sessions.get(login_id)
        return session.view() if session else None

    async def wait(self, login_id: str, timeout_s: float) -> Login | None:
        """The login once it finished, or as it is after `timeout_s` (at most MAX_WAIT_S)."""
        session = self._sessions.get(login_id)
        if session is None:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(session.done.wait(), min(max(timeout_s, 0.0), MAX_WAIT_S))
        return session.view()

    def cancel(self, login_id: str) -> Login | None:
        session = self._sessions.get(login_id)
        if session is None:
            return None
        if not session.done.is_set() and not session.storing:
            if session.task is not None:
                session.task.cancel()
            session.finish("cancelled", ("cancelled", "the login was cancelled"))
        return session.view()

    def _forget_old(self) -> None:
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.finished_at is not None and now - session.finished_at > KEEP_FINISHED_S:
                del self._sessions[session.id]

    async def _drive(self, session: _Session) -> None:
        login = session.device
        try:
            try:
                credentials = await self._poll_until_done(login)
            except LoginError as exc:
                session.finish(_STATES.get(exc.code, "failed"), (exc.code, str(exc)))
                return
            session.storing = True
            try:
                session.account = await self._store_account(login, credentials)
            except StoreError as exc:
                session.finish("failed", ("store_failed", str(exc)))
                return
            session.finish("approved")
        finally:
            await self._client.forget_account(login.owner)
            if session.done.is_set():
                account = session.account["id"] if session.account else None
                log.event(
                    logger, "login_finished", login=session.id, state=session.state, account=account
                )

    async def _poll_until_done(self, login: device.DeviceLogin) -> Credentials:
        """Bounded by the code's expiry: `poll` raises `expired_token` once it has passed."""
        while True:
            await asyncio.sleep(login.interval_s)
            try:
                credentials = await device.poll(self._client, login)
            except LoginError as exc:
                if exc.code != "unreachable":
                    raise
                continue  # a network blip: keep polling until the code expires
            if credentials is not None:
                return credentials

    async def _store_account(
        self, login: device.DeviceLogin, credentials: Credentials
    ) -> dict[str, Any]:
        # No profile ARN comes back from an OIDC login: ask Kiro which profiles it has
        # (docs/UPSTREAM.md §5.3).
        discovery = await self._discover(login, credentials)
        usage = await self._usage(login, credentials)
        kind = _KIND_NAMES[login.auth_kind]
        label = f"{usage.email} ({kind})" if usage and usage.email else f"{kind} (device login)"
        record = await self._store.insert(
            label=label,
            auth_kind=login.auth_kind.value,
            region=api_region(discovery.only, login.region),
            auth_region=login.region,
            credentials=credentials.to_json(),
            profile_arn=discovery.only,
            proxy_url=login.proxy_url,
        )
        if len(discovery.profiles) > 1:
            reason = profiles.needs_profile_reason(discovery, record.id)
            decide = profiles.waiting_for_profile(reason)
            record = await self._store.update_state(record.id, decide) or record
        if usage is not None:
            record = await self._store.set_usage(record.id, usage.to_json()) or record
        self._on_added(record.id)
        return record.redacted()

    async def _discover(
        self, login: device.DeviceLogin, credentials: Credentials
    ) -> profiles.Discovery:
        account = UpstreamAccount(
            id=login.owner,
            region=mapped_api_region(login.region),
            auth_region=login.region,
            auth_kind=login.auth_kind,
            profile_arn=None,
            credentials=credentials,
            proxy_url=login.proxy_url,
        )
        return await profiles.discover(self._client, account)

    async def _usage(
        self, login: device.DeviceLogin, credentials: Credentials
    ) -> UsageSnapshot | None:
        """The new account's usage (and e-mail); a failure only costs the label."""
        account = UpstreamAccount(
            id=login.owner,
            region=mapped_api_region(login.region),
            auth_region=login.region,
            auth_kind=login.auth_kind,
            profile_arn=None,
            credentials=credentials,
            proxy_url=login.proxy_url,
        )
        try:
            return parse_usage_limits(await self._client.usage_limits(account))
        except UpstreamError as exc:
            log.event(
                logger, "login_usage_failed", level=logging.WARNING, failure=exc.failure.value
            )
            return None

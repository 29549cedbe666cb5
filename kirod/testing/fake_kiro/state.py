"""`FakeKiro`, the fake service's state, and `RecordedRequest`, what it keeps of each request.

`server.py` serves this state over HTTP; the handlers (`chat.py`, `qapi.py`, `auth.py`,
`admin.py`) read and change it, and import it from here, below the server that imports them.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS, Model
from kirod.testing.fake_kiro.connections import Connections
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.routing import OPERATIONS
from kirod.testing.fake_kiro.script import Latency, Reply, Script
from kirod.testing.fake_kiro.search import Search
from kirod.testing.fake_kiro.tokens import Account, AuthKind, DeviceFlow, TokenRegistry, TokenSet
from kirod.testing.fake_kiro.usage import Usage


@dataclass
class RecordedRequest:
    """One request the fake received (admin calls excluded), secrets and all."""

    operation: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    account_id: str | None = None
    status: int | None = None
    rejected_by: str | None = None  # the validation rule, for rejected chats
    # The API host's region, from a leading `/<region>/` path segment; None: no segment, a
    # host that plays every region (what tests that ignore regions use).
    region: str | None = None
    connection: int = 0  # the serial of the TCP connection it came on (`connections.py`)

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None if it is not JSON."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["body"] = self.body.decode("utf-8", "replace")
        data["json"] = self.json
        return data


class FakeKiro:
    """The fake's state: catalog, credentials, script queues, received requests, counters.

    Scripts are answered FIFO, an account's own queue before the shared one; when both are
    empty, the account's standing script (`set_account_script`: a fault kept on one account,
    such as its connection dropping after two events), else `default_script` (or, if None, an
    echo of the prompt) answers. Every method is
    thread-safe, so a test thread may script a fake served by `ThreadedFake`.

    `created` lists every fake made in this process, so a test session can scan everything kirod
    wrote for any secret any fake issued.
    """

    created: ClassVar[list[FakeKiro]] = []

    def __init__(
        self,
        *,
        models: Iterable[Model] = DEFAULT_MODELS,
        latency: Latency = Latency(),  # noqa: B008 - frozen
        models_page_size: int = 4,
        access_ttl_s: int = 3600,
        rotate_refresh_tokens: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens = TokenRegistry(
            access_ttl_s=access_ttl_s, rotate_refresh=rotate_refresh_tokens, clock=clock
        )
        self.latency = latency
        self.models_page_size = models_page_size
        self.default_script: Script | None = None
        self._models = {model.model_id: model for model in models}
        self._lock = threading.Lock()
        self._queue: collections.deque[Script] = collections.deque()
        self._searches: collections.deque[Search] = collections.deque()
        self._account_queues: dict[str, collections.deque[Script]] = {}
        self._account_scripts: dict[str, Script] = {}
        self._requests: list[RecordedRequest] = []
        FakeKiro.created.append(self)
        self._counters: collections.Counter[str] = collections.Counter()
        self._oversize: dict[str, int] = {}
        self.connections = Connections(self.count)
        # The changes switched on (`drift.Drift`); empty: today's Kiro.
        self.drifts: frozenset[Drift] = frozenset()

    # Scripting

    def enqueue(self, *items: Script | Reply, account_id: str | None = None) -> None:
        """Queue answers for the next chats (of `account_id` only, if given)."""
        scripts = [item if isinstance(item, Script) else Script(reply=item) for item in items]
        with self._lock:
            queue = (
                self._queue
                if account_id is None
                else self._account_queues.setdefault(account_id, collections.deque())
            )
            queue.extend(scripts)

    def set_account_script(self, account_id: str, script: Script | None) -> None:
        """Answer every chat of `account_id` with `script` once its queue is empty (None: the
        default again); other accounts are unaffected."""
        with self._lock:
            if script is None:
                self._account_scripts.pop(account_id, None)
            else:
                self._account_scripts[account_id] = script

    def pending_scripts(self) -> int:
        with self._lock:
            return len(self._queue) + sum(len(q) for q in self._account_queues.values())

    def clear_scripts(self) -> None:
        with self._lock:
            self._queue.clear()
            self._account_queues.clear()
            self._searches.clear()

    def enqueue_search(self, *scripts: Search) -> None:
        """Queue answers for the next MCP web searches (else: three deterministic results)."""
        with self._lock:
            self._searches.extend(scripts)

    def next_search(self) -> Search:
        with self._lock:
            return self._searches.popleft() if self._searches else Search()

    def next_script(self, account_id: str) -> Script:
        with self._lock:
            for queue in (self._account_queues.get(account_id), self._queue):
                if queue:
                    return queue.popleft()
            standing = self._account_scripts.get(account_id)
        return standing or self.default_script or Script()

    def oversize(self, operation: str, nbytes: int) -> None:
        """From now on, answer `operation` (usage, models, social_refresh, oidc_register, …;
        not chat) with a valid JSON document padded to about `nbytes`, sent in chunks as the
        client reads it; 0 restores normal answers. A client that stops reading ends it."""
        if operation == "chat" or operation not in OPERATIONS:
            raise ValueError(f"cannot oversize {operation!r}")
        with self._lock:
            if nbytes > 0:
                self._oversize[operation] = nbytes
            else:
                self._oversize.pop(operation, None)

    def oversized(self, operation: str) -> int:
        """The padding `oversize` set for `operation`; 0: none."""
        with self._lock:
            return self._oversize.get(operation, 0)

    # Accounts and credentials

    def issue_social_account(
        self, *, subscription: str = "KIRO PRO", provider: str = "Google", region: str = "us-east-1"
    ) -> TokenSet:
        """A Google/GitHub account: refresh at `/refreshToken`, profileArn required on chats."""
        return self.tokens.create_account(
            AuthKind.SOCIAL, provider=provider, subscription=subscription, region=region
        )

    def issue_idc_account(
        self,
        *,
        subscription: str = "KIRO PRO",
        provider: str = "BuilderId",
        region: str = "us-east-1",
        profile_region: str | None = None,
        extra_profiles: int = 0,
    ) -> TokenSet:
        """A Builder ID / Identity Center account with its OIDC client (clientId/secret).

        `region` is the IdC (OIDC) region; `profile_region` that of its Q profile (default the
        same); `extra_profiles` more profiles for ListAvailableProfiles to report."""
        return self.tokens.create_account(
            AuthKind.IDC,
            provider=provider,
            subscription=subscription,
            region=region,
            profile_region=profile_region,
            extra_profiles=extra_profiles,
        )

    def issue_external_idp_account(
        self, *, subscription: str = "KIRO PRO", region: str = "us-east-1"
    ) -> TokenSet:
        """An Entra ID / Okta account: refresh is a form post to `EXTERNAL_IDP_TOKEN_PATH`
        (here, on this server) and every Kiro call needs `TokenType: EXTERNAL_IDP`."""
        return self.tokens.create_account(
            AuthKind.EXTERNAL_IDP, subscription=subscription, region=region
        )

    def issue_api_key_account(self, *, subscription: str = "KIRO PRO") -> TokenSet:
        """A headless account whose `access_token` is a `ksk_` key (no refresh token)."""
        return self.tokens.create_account(AuthKind.API_KEY, subscription=subscription)

    def account(self, account_id: str) -> Account:
        return self.tokens.account(account_id)

    def set_usage(self, account_id: str, **changes: Any) -> Usage:
        """Overwrite `Usage` fields (current, limit, next_date_reset, bonuses, free_trial, …)."""
        updated = self.tokens.update_account(
            account_id,
            lambda account: dataclasses.replace(
                account, usage=dataclasses.replace(account.usage, **changes)
            ),
        )
        return updated.usage

    def suspend_account(self, account_id: str, suspended: bool = True) -> None:
        """Every chat of a suspended account gets 403 TEMPORARILY_SUSPENDED."""
        self.tokens.update_account(
            account_id, lambda account: dataclasses.replace(account, suspended=suspended)
        )

    def set_drifts(self, *drifts: Drift) -> None:
        """Answer with these changes on top of today's behaviour (none: today's Kiro)."""
        self.drifts = frozenset(drifts)

    def set_listed_windows(self, account_id: str, listed: bool = True) -> None:
        """Whether the account still has every model's listed window (GPT-5.6 at 272 000, as
        before the 1M rollout reached it); see `catalog.Model.window`."""
        self.tokens.update_account(
            account_id, lambda account: dataclasses.replace(account, listed_windows=listed)
        )

    def gate_egress(self, account_id: str, gated: bool = True) -> None:
        """The account's requests leave from mainland China or Hong Kong: since about May 2026
        Kiro lists it no Claude model and answers any `claude-*` id 400 INVALID_MODEL_ID, while
        through a proxy elsewhere the same account lists them all (kirodotdev/Kiro issues #8077,
        #8168, #8309; sunerpy/kiro-provider
        docs/audits/opus-5-5-catalog-probe-2026-09-26.zh.md, 2026-09-26). Off: as through such
        a proxy."""
        self.tokens.update_account(
            account_id, lambda account: dataclasses.replace(account, egress_gated=gated)
        )

    def refuse_request_fields(self, account_id: str, refuses: bool = True) -> None:
        """The account refuses root additionalModelRequestFields (an external-IdP account's)."""
        self.tokens.update_account(
            account_id,
            lambda account: dataclasses.replace(account, refuses_request_fields=refuses),
        )

    def expire_access_token(self, access_token: str) -> None:
        self.tokens.expire_access_token(access_token)

    def expire_account_tokens(self, account_id: str) -> None:
        self.tokens.expire_account_tokens(account_id)

    def revoke_refresh_token(self, refresh_token: str) -> None:
        self.tokens.revoke_refresh_token(refresh_token)

    def set_device_flow(self, flow: DeviceFlow) -> None:
        """How device authorizations started from now on answer their polls."""
        self.tokens.device_flow = flow

    def issued_secrets(self) -> tuple[str, ...]:
        """Every token, key, client secret and code ever issued, for leak scans."""
        return self.tokens.issued()

    def refresh_tokens(self, account_id: str) -> tuple[str, ...]:
        """Every refresh token issued to the account, oldest first (with rotation, only the
        last one is still accepted)."""
        return self.tokens.refresh_tokens(account_id)

    # Catalog

    def models(self) -> list[Model]:
        with self._lock:
            return list(self._models.values())

    def set_models(self, models: Iterable[Model]) -> None:
        """Replace the whole catalog (e.g. one with models no kirod release knows of)."""
        with self._lock:
            self._models = {model.model_id: model for model in models}

    def set_model(self, model: Model) -> None:
        """Add or replace a catalog entry (e.g. a tiny context window for overflow tests)."""
        with self._lock:
            self._models[model.model_id] = model

    # Observation

    def requests(self, operation: str | None = None) -> list[RecordedRequest]:
        """Received requests, oldest first; `operation` is e.g. chat, usage, oidc_token."""
        with self._lock:
            return [
                dataclasses.replace(r)
                for r in self._requests
                if operation is None or r.operation == operation
            ]

    def answered(
        self, operation: str | None = None, *, within_s: float = 5.0
    ) -> list[RecordedRequest]:
        """`requests`, once each has its status: a streamed answer's is noted when its handler
        ends, which may be after its client read the whole answer."""
        deadline = time.monotonic() + within_s
        while True:
            found = self.requests(operation)
            if all(r.status is not None for r in found) or time.monotonic() > deadline:
                return found
            time.sleep(0.01)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def counters(self) -> dict[str, int]:
        """`requests:<operation>`, `status:<code>`, `rejected:<rule>`, `fault:<name>`,
        `connection_fault:<name>`, `streams_completed`."""
        with self._lock:
            return dict(self._counters)

    def count(self, *names: str) -> None:
        """Add one to each named counter (see `counters`)."""
        with self._lock:
            self._counters.update(names)

    def record_request(self, record: RecordedRequest) -> None:
        """Keep a request as it arrives (see `requests`), and count it."""
        with self._lock:
            self._requests.append(record)
            self._counters[f"requests:{record.operation}"] += 1

    def finish_request(self, record: RecordedRequest, status: int) -> None:
        """Note the status `record` was answered with, and count it."""
        with self._lock:
            record.status = status
            self._counters[f"status:{status}"] += 1

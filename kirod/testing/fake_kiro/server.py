"""`FakeKiro`, the fake service's state, and the aiohttp application that serves it.

One server answers every host kirod talks to (Q API, Kiro auth, SSO OIDC), so tests point all
three base URLs at it. Routing follows kiro-protocol.md §1.3: IDE paths (`…/getUsageLimits`,
`…/generateAssistantResponse`, …) and the CLI's `POST /` with `x-amz-target`, JSON or
awsJson1.0 alike.
Test controls live under `/__fake__/` (see `admin.py`) so another process can drive the fake.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aiohttp import web

from kirod.testing.fake_kiro import admin, auth
from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS, InvalidNextToken, Model, models_page
from kirod.testing.fake_kiro.connections import Connections
from kirod.testing.fake_kiro.script import (
    BEARER_INVALID_BODY,
    ChatRequest,
    Cut,
    Fault,
    Latency,
    Pause,
    Reply,
    Script,
    StreamPlan,
    http_failure,
    plan_stream,
    suspended_body,
)
from kirod.testing.fake_kiro.search import WEB_SEARCH_TOOL, Search, SearchFault, search_text
from kirod.testing.fake_kiro.tokens import (
    EXTERNAL_IDP_TOKEN_PATH,
    Account,
    AuthKind,
    DeviceFlow,
    TokenRegistry,
    TokenSet,
)
from kirod.testing.fake_kiro.usage import Usage
from kirod.testing.fake_kiro.validate import RULES, validate_chat

EVENTSTREAM_CONTENT_TYPE = "application/vnd.amazon.eventstream"


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
    empty, `default_script` (or, if None, an echo of the prompt) answers. Every method is
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
        self._requests: list[RecordedRequest] = []
        FakeKiro.created.append(self)
        self._counters: collections.Counter[str] = collections.Counter()
        self._oversize: dict[str, int] = {}
        self.connections = Connections(self._count)

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
        return self.default_script or Script()

    def oversize(self, operation: str, nbytes: int) -> None:
        """From now on, answer `operation` (usage, models, social_refresh, oidc_register, …;
        not chat) with a valid JSON document padded to about `nbytes`, sent in chunks as the
        client reads it; 0 restores normal answers. A client that stops reading ends it."""
        if operation == "chat" or operation not in _HANDLERS:
            raise ValueError(f"cannot oversize {operation!r}")
        with self._lock:
            if nbytes > 0:
                self._oversize[operation] = nbytes
            else:
                self._oversize.pop(operation, None)

    def _oversized(self, operation: str) -> int:
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

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def counters(self) -> dict[str, int]:
        """`requests:<operation>`, `status:<code>`, `rejected:<rule>`, `fault:<name>`,
        `connection_fault:<name>`, `streams_completed`."""
        with self._lock:
            return dict(self._counters)

    def _count(self, *names: str) -> None:
        with self._lock:
            self._counters.update(names)

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)
            self._counters[f"requests:{record.operation}"] += 1

    def _finish(self, record: RecordedRequest, status: int) -> None:
        with self._lock:
            record.status = status
            self._counters[f"status:{status}"] += 1


Handler = Callable[[FakeKiro, web.Request, RecordedRequest], Awaitable[web.StreamResponse]]

_GET_POST = frozenset({"GET", "POST"})
_POST = frozenset({"POST"})
_GET = frozenset({"GET"})


def build_app(fake: FakeKiro) -> web.Application:
    """The fake service: admin routes first, then every other path through `_dispatch`."""
    app = web.Application(
        client_max_size=16 * 1024 * 1024, handler_args={"handler_cancellation": True}
    )
    app.add_routes(admin.routes(fake))

    async def dispatch(request: web.Request) -> web.StreamResponse:
        return await _dispatch(fake, request)

    app.router.add_route("*", "/{path:.*}", dispatch)
    return app


API_REGIONS = ("us-east-1", "eu-central-1")
"""Regions the fake serves; tests tell them apart with `Endpoints(kiro=base + "/{region}")`."""


def _host_region(path: str) -> tuple[str | None, str]:
    """(region, rest of the path): a leading `/us-east-1` or `/eu-central-1` segment names the
    host's region; a path without one is answered as by a host of every region."""
    first, _, rest = path.lstrip("/").partition("/")
    if first in API_REGIONS:
        return first, "/" + rest
    return None, path


async def _dispatch(fake: FakeKiro, request: web.Request) -> web.StreamResponse:
    region, path = _host_region(request.path)
    operation = _operation(request, path)
    if operation is None:
        return _error(404, {"message": "Unknown operation."}, "UnknownOperationException")
    handler, methods = _HANDLERS[operation]
    if request.method not in methods:
        return _error(405, {"message": "Method not allowed."}, "MethodNotAllowedException")
    connection = await fake.connections.admit(request, operation)
    if connection is None:  # a connection fault met it: never sent, the connection is gone
        return web.Response(status=499)
    record = RecordedRequest(
        operation=operation,
        method=request.method,
        path=request.path,
        query=dict(request.query),
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.read(),
        region=region,
        connection=connection,
    )
    fake._record(record)
    status = 499  # the client went away before the answer was complete
    try:
        response = await handler(fake, request, record)
        padding = fake._oversized(operation)
        if padding and isinstance(response, web.Response) and response.body is not None:
            fake._count(f"oversized:{operation}")
            response = await _padded(request, response, padding)
        status = response.status
        return response
    finally:
        fake._finish(record, status)
        fake.connections.done(request)


PAD_CHUNK = 64 * 1024


async def _padded(request: web.Request, answer: web.Response, nbytes: int) -> web.StreamResponse:
    """`answer`'s JSON object with a leading `"padding"` member of about `nbytes`, chunked and
    without Content-Length, so the client can only find the size by reading."""
    assert isinstance(answer.body, bytes)
    body = answer.body
    response = web.StreamResponse(status=answer.status, headers={"x-amzn-RequestId": "padded"})
    response.content_type = "application/json"
    chunk = b"x" * PAD_CHUNK
    with contextlib.suppress(ConnectionError):  # the client stopped reading: that is the test
        await response.prepare(request)
        await response.write(b'{"padding":"')
        for _ in range(max(1, nbytes // PAD_CHUNK)):
            await response.write(chunk)
        await response.write(b'"' + (b"," + body[1:] if body.strip() != b"{}" else b"}"))
        await response.write_eof()
    return response


def _operation(request: web.Request, path: str) -> str | None:
    """§1.3: the operation a request names, by `x-amz-target` on `/` or by path suffix."""
    path = path.rstrip("/")
    if not path:
        target = request.headers.get("x-amz-target", "")
        return _TARGET_OPERATIONS.get(target.rpartition(".")[2])
    for suffix, operation in _PATH_OPERATIONS:
        if path.endswith(suffix):
            return operation
    return None


# Q API


def _authenticate(fake: FakeKiro, request: web.Request) -> Account | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return fake.tokens.authenticate(token.strip(), request.headers.get("tokentype"))


def _bearer_invalid() -> web.Response:
    return _error(403, BEARER_INVALID_BODY, "AccessDeniedException")


async def _chat(
    fake: FakeKiro, request: web.Request, record: RecordedRequest
) -> web.StreamResponse:
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    models = {model.model_id: model for model in fake.models()}
    rejection = validate_chat(record.body, models)
    if rejection is not None:
        record.rejected_by = rejection.rule
        fake._count(f"rejected:{rejection.rule}")
        return _error(rejection.status, rejection.body, rejection.error_type)
    root = json.loads(record.body)
    model = models[root["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]]
    refusal = _account_refusal(account, root, model, record.region)
    if refusal is not None:
        return refusal
    script = fake.next_script(account.account_id)
    if script.fault is not None:
        fake._count(f"fault:{script.fault.name}")
    failure = http_failure(script, account.user_id)
    if failure is not None:
        return _error(failure.status, failure.body, failure.error_type, failure.headers)
    plan = plan_stream(script, ChatRequest.parse(root, model), fake.latency)
    response, completed = await _stream(request, plan)
    if completed:
        fake._count("streams_completed")
        fake.tokens.update_account(
            account.account_id,
            lambda current: dataclasses.replace(current, usage=current.usage.consume(plan.credits)),
        )
    return response


def _account_refusal(
    account: Account, root: Mapping[str, Any], model: Model, host_region: str | None
) -> web.Response | None:
    """What the account itself forbids: suspension, wrong region or profile, plan, quota."""
    if account.suspended:
        return _error(403, suspended_body(account.user_id), "AccessDeniedException")
    profile_arn = root.get("profileArn")
    arn_region = profile_arn.split(":")[3:4] if isinstance(profile_arn, str) else None
    if host_region is not None and arn_region is not None and arn_region != [host_region]:
        # A profile of another region sent to this region's host (capabilities §5.2).
        return _error(400, {"message": "Improperly formed request."}, "ValidationException")
    if profile_arn is None:
        # Every login kind: the q.{region} hosts want the ARN on each chat (capabilities §5.2).
        body = {"message": "profileArn is required for this request."}
        return _error(400, body, "ValidationException")
    if profile_arn != account.profile_arn:
        body = {"message": "User is not authorized to make this call."}
        return _error(403, body, "AccessDeniedException")
    if model.premium and "FREE" in account.usage.subscription:
        return _error(400, RULES["invalid_model_id"].body, "ValidationException")
    if account.usage.remaining() <= 0:
        failure = http_failure(Script(fault=Fault.QUOTA_402), account.user_id)
        assert failure is not None
        return _error(failure.status, failure.body, failure.error_type)
    return None


async def _stream(request: web.Request, plan: StreamPlan) -> tuple[web.StreamResponse, bool]:
    """Write the plan's frames with its delays; return whether the body was completed."""
    response = web.StreamResponse(headers={"x-amzn-RequestId": str(uuid.uuid4())})
    response.content_type = EVENTSTREAM_CONTENT_TYPE
    try:
        await response.prepare(request)
        for step in plan.steps:
            if isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Cut):
                await response.write(step.data)
                request.protocol.force_close()
                return response, False
            else:
                if step.delay_s:
                    await asyncio.sleep(step.delay_s)
                await response.write(step.data)
        await response.write_eof()
    except ConnectionError:
        return response, False
    return response, True


async def _usage(fake: FakeKiro, request: web.Request, record: RecordedRequest) -> web.Response:
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    params: dict[str, Any] = dict(request.query)
    params.update(_json_object(record.body))
    profile_arn = params.get("profileArn")
    if request.path.rstrip("/") == "" and not profile_arn:
        return _error(400, {"message": "Invalid profileArn."}, "ValidationException")
    if profile_arn and profile_arn != account.profile_arn:
        body = {"message": "User is not authorized to access this feature."}
        return _error(403, body, "AccessDeniedException")
    email = account.email if str(params.get("isEmailRequired")).lower() == "true" else None
    now = fake.tokens.now()
    return web.json_response(account.usage.to_json(email=email, user_id=account.user_id, now=now))


OVERAGE_REFUSED_BODY = {"message": "User is not authorized to access this feature."}
"""A Free plan's setUserPreference answer. Peers report only its status (capabilities §9); the
body is the one of getUsageLimits' 403 (kiro-protocol §6.1)."""


async def _preference(
    fake: FakeKiro, request: web.Request, record: RecordedRequest
) -> web.Response:
    """setUserPreference: the overage switch, kept per account and reported by getUsageLimits."""
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    body = _json_object(record.body)
    status = _dict(body.get("overageConfiguration")).get("overageStatus")
    if status not in ("ENABLED", "DISABLED"):
        invalid = {"message": "overageStatus must be ENABLED or DISABLED."}
        return _error(400, invalid, "ValidationException")
    profile_arn = body.get("profileArn")
    if profile_arn is not None and profile_arn != account.profile_arn:
        other = {"message": "User is not authorized to make this call."}
        return _error(403, other, "AccessDeniedException")
    if not account.usage.overage_capable:
        return _error(403, OVERAGE_REFUSED_BODY, "AccessDeniedException")
    fake.set_usage(account.account_id, overage_status=status)
    return web.json_response({})


async def _models(fake: FakeKiro, request: web.Request, record: RecordedRequest) -> web.Response:
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    params: dict[str, Any] = dict(request.query)
    params.update(_json_object(record.body))
    free = "FREE" in account.usage.subscription
    models = [model for model in fake.models() if not (free and model.premium)]
    try:
        max_results = int(params.get("maxResults", fake.models_page_size))
        page = models_page(models, next_token=params.get("nextToken"), max_results=max_results)
    except (ValueError, InvalidNextToken):
        return _error(400, {"message": "Invalid pagination parameters."}, "ValidationException")
    return web.json_response(page)


def _profile_name(account: Account) -> str:
    return "Social_Default_Profile" if account.kind is AuthKind.SOCIAL else "QDefaultProfile"


async def _profiles(fake: FakeKiro, request: web.Request, record: RecordedRequest) -> web.Response:
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    if account.kind is AuthKind.API_KEY:
        # A `ksk_` key cannot list profiles in any region; GetProfile names its one (§5.3).
        return _error(403, {"message": "Unsupported token type"}, "AccessDeniedException")
    name = _profile_name(account)
    # Regional: a host lists only its own region's profiles, one per page.
    arns = [
        arn
        for arn in account.profiles()
        if record.region is None or arn.split(":")[3] == record.region
    ]
    start = int(token) if (token := _json_object(record.body).get("nextToken")) else 0
    page = [
        {"arn": arn, "profileName": name if arn == account.profile_arn else f"Profile{i}"}
        | {"status": "ACTIVE"}
        for i, arn in enumerate(arns[start : start + 1], start)
    ]
    answer: dict[str, Any] = {"profiles": page}
    if start + 1 < len(arns):
        answer["nextToken"] = str(start + 1)
    return web.json_response(answer)


async def _profile(fake: FakeKiro, request: web.Request, record: RecordedRequest) -> web.Response:
    """GetProfile: the caller's own profile, from the host of its region (a 403 elsewhere)."""
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    if record.region is not None and account.profile_arn.split(":")[3] != record.region:
        return _error(403, {"message": "User is not authorized."}, "AccessDeniedException")
    profile = {
        "arn": account.profile_arn,
        "profileName": _profile_name(account),
        "status": "ACTIVE",
    }
    return web.json_response({"profile": profile})


async def _mcp(fake: FakeKiro, request: web.Request, record: RecordedRequest) -> web.Response:
    """JSON-RPC `tools/list`, and `tools/call` of `web_search` (`search.py`)."""
    account = _authenticate(fake, request)
    if account is None:
        return _bearer_invalid()
    record.account_id = account.account_id
    call = _json_object(record.body)
    profile_arn = call.get("profileArn")
    if profile_arn is None and account.kind is AuthKind.SOCIAL:
        body = {"message": "profileArn is required for this request.", "reason": None}
        return _error(400, body, "ValidationException")
    if profile_arn is not None and profile_arn != account.profile_arn:
        return _error(403, {"message": "User is not authorized."}, "AccessDeniedException")
    reply: dict[str, Any] = {"id": call.get("id"), "jsonrpc": "2.0"}
    params = _dict(call.get("params"))
    arguments = _dict(params.get("arguments"))
    if call.get("method") == "tools/list":
        reply["result"] = {"tools": [WEB_SEARCH_TOOL]}
        return web.json_response(reply)
    if call.get("method") != "tools/call" or params.get("name") != "web_search":
        reply["error"] = {"code": -32601, "message": "Method not found"}
        return web.json_response(reply)
    script = fake.next_search()
    if script.fault is not None:
        fake._count(f"search_fault:{script.fault.value}")
    if script.delay_s or script.fault is SearchFault.SLOW:
        await asyncio.sleep(script.delay_s)
    match script.fault:
        case SearchFault.FORBIDDEN:
            return _error(403, {"message": "User is not authorized."}, "AccessDeniedException")
        case SearchFault.SERVER_ERROR:
            return _error(500, {"message": "Internal error."}, "InternalServerException")
        case SearchFault.MALFORMED:
            return web.Response(text="<html>not json-rpc", content_type="application/json")
        case SearchFault.RPC_ERROR:
            reply["error"] = {"code": -32603, "message": "Internal error"}
            return web.json_response(reply)
    text = search_text(script, str(arguments.get("query", "")))
    is_error = script.fault is SearchFault.TOOL_ERROR
    reply["result"] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    fake._count("searches")
    return web.json_response(reply)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body) if body else {}
    except (ValueError, RecursionError):
        return {}
    return _dict(value)


def _error(
    status: int,
    body: Mapping[str, Any],
    error_type: str,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """An AWS-JSON error: the code in `x-amzn-errortype`, `message`/`reason` in the body."""
    return web.json_response(
        dict(body),
        status=status,
        headers={
            "x-amzn-errortype": error_type,
            "x-amzn-RequestId": str(uuid.uuid4()),
            **(headers or {}),
        },
    )


def _auth_handler(
    handler: Callable[[TokenRegistry, web.Request, dict[str, Any]], Awaitable[web.Response]],
) -> Handler:
    async def bound(
        fake: FakeKiro, request: web.Request, record: RecordedRequest
    ) -> web.StreamResponse:
        return await handler(fake.tokens, request, _json_object(record.body))

    return bound


def _form_handler(
    handler: Callable[[TokenRegistry, web.Request, dict[str, Any]], Awaitable[web.Response]],
) -> Handler:
    """`_auth_handler` for a form-encoded body (an OAuth token endpoint)."""

    async def bound(
        fake: FakeKiro, request: web.Request, record: RecordedRequest
    ) -> web.StreamResponse:
        fields = urllib.parse.parse_qs(record.body.decode("utf-8", "replace"))
        return await handler(fake.tokens, request, {k: v[0] for k, v in fields.items()})

    return bound


_HANDLERS: dict[str, tuple[Handler, frozenset[str]]] = {
    "chat": (_chat, _POST),
    "usage": (_usage, _GET_POST),
    "models": (_models, _GET_POST),
    "profiles": (_profiles, _GET_POST),
    "profile": (_profile, _POST),
    "mcp": (_mcp, _POST),
    "preference": (_preference, _POST),
    "social_refresh": (_auth_handler(auth.social_refresh), _POST),
    "social_login": (_auth_handler(auth.social_login), _GET),
    "social_token": (_auth_handler(auth.social_token), _POST),
    "oidc_register": (_auth_handler(auth.oidc_register), _POST),
    "oidc_device": (_auth_handler(auth.oidc_device_authorization), _POST),
    "oidc_token": (_auth_handler(auth.oidc_token), _POST),
    "external_idp_token": (_form_handler(auth.external_idp_token), _POST),
}

_TARGET_OPERATIONS = {
    "GenerateAssistantResponse": "chat",
    "SendMessage": "chat",
    "GetUsageLimits": "usage",
    "ListAvailableModels": "models",
    "ListAvailableProfiles": "profiles",
    "GetProfile": "profile",
    "InvokeMCP": "mcp",
}

# Longest suffixes first: `/oauth/token` must win over `/token`.
_PATH_OPERATIONS = (
    ("/generateAssistantResponse", "chat"),
    ("/getUsageLimits", "usage"),
    ("/ListAvailableModels", "models"),
    ("/ListAvailableProfiles", "profiles"),
    ("/mcp", "mcp"),
    ("/setUserPreference", "preference"),
    ("/refreshToken", "social_refresh"),
    ("/login", "social_login"),
    (EXTERNAL_IDP_TOKEN_PATH, "external_idp_token"),
    ("/oauth/token", "social_token"),
    ("/client/register", "oidc_register"),
    ("/device_authorization", "oidc_device"),
    ("/token", "oidc_token"),
)

"""Test controls under `/__fake__/`, so a fake in another process can be scripted and read.

JSON in and out; field names are the Python names (snake_case), except token sets, which are
camelCase like Kiro's own token file. `RemoteFake` in `remote.py` is the matching client.

    POST   /__fake__/scripts        {"scripts": [Script…], "account_id"?}   queue answers
    DELETE /__fake__/scripts                                                clear the queues
    PUT    /__fake__/default-script {"script": Script | null, "account_id"?}  (one account's)
    PUT    /__fake__/latency        {"first_s", "between_s"}
    PUT    /__fake__/settings       {"rotate_refresh_tokens"?, "access_ttl_s"?, "models_page_size"?}
    PUT    /__fake__/device-flow    DeviceFlow fields
    PUT    /__fake__/models         Model fields                            add or replace
    PUT    /__fake__/oversize       {"operation", "bytes"}                  padded answers
    POST   /__fake__/accounts       {"kind": social|idc|api_key, "subscription"?, …} → token set
    GET    /__fake__/accounts                                               ids, kinds, usage
    PUT    /__fake__/usage          {"account_id", Usage fields…}
    PUT    /__fake__/suspension     {"account_id", "suspended"}
    PUT    /__fake__/listed-windows {"account_id", "listed"}                 GPT-5.6 at 272K
    PUT    /__fake__/egress         {"account_id", "gated"}                 no Claude from there
    PUT    /__fake__/drift          {"drifts": [Drift name…]}               tomorrow's Kiro
    POST   /__fake__/tokens/expire  {"access_token"} | {"account_id"}
    POST   /__fake__/tokens/revoke  {"refresh_token"}
    GET    /__fake__/requests?operation=chat                                received requests
    DELETE /__fake__/requests
    GET    /__fake__/counters
    GET    /__fake__/secrets                                                every issued secret
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kirod.testing.fake_kiro.catalog import Model
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.script import Latency, Script
from kirod.testing.fake_kiro.state import FakeKiro
from kirod.testing.fake_kiro.tokens import AuthKind, DeviceFlow, DeviceOutcome
from kirod.testing.fake_kiro.usage import Bonus, FreeTrial

PREFIX = "/__fake__"

_Action = Callable[["FakeKiro", web.Request, Any], Awaitable[Any]]


def routes(fake: FakeKiro) -> list[web.RouteDef]:
    """The admin route table, bound to `fake`."""

    def bind(action: _Action) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            try:
                data = await request.json() if request.can_read_body else None
                result = await action(fake, request, data)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=400)
            return web.json_response({} if result is None else result)

        return handler

    return [
        web.post(f"{PREFIX}/scripts", bind(_enqueue)),
        web.delete(f"{PREFIX}/scripts", bind(_clear_scripts)),
        web.put(f"{PREFIX}/default-script", bind(_default_script)),
        web.put(f"{PREFIX}/latency", bind(_latency)),
        web.put(f"{PREFIX}/settings", bind(_settings)),
        web.put(f"{PREFIX}/device-flow", bind(_device_flow)),
        web.put(f"{PREFIX}/models", bind(_model)),
        web.put(f"{PREFIX}/oversize", bind(_oversize)),
        web.post(f"{PREFIX}/accounts", bind(_issue_account)),
        web.get(f"{PREFIX}/accounts", bind(_accounts)),
        web.put(f"{PREFIX}/usage", bind(_usage)),
        web.put(f"{PREFIX}/suspension", bind(_suspension)),
        web.put(f"{PREFIX}/listed-windows", bind(_listed_windows)),
        web.put(f"{PREFIX}/egress", bind(_egress)),
        web.put(f"{PREFIX}/drift", bind(_drift)),
        web.post(f"{PREFIX}/tokens/expire", bind(_expire)),
        web.post(f"{PREFIX}/tokens/revoke", bind(_revoke)),
        web.get(f"{PREFIX}/requests", bind(_requests)),
        web.delete(f"{PREFIX}/requests", bind(_clear_requests)),
        web.get(f"{PREFIX}/counters", bind(_counters)),
        web.get(f"{PREFIX}/secrets", bind(_secrets)),
    ]


async def _enqueue(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.enqueue(
        *(Script.from_json(item) for item in data["scripts"]), account_id=data.get("account_id")
    )
    return {"pending": fake.pending_scripts()}


async def _clear_scripts(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.clear_scripts()


async def _default_script(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    script = None if data["script"] is None else Script.from_json(data["script"])
    account_id = data.get("account_id")
    if account_id is None:
        fake.default_script = script
    else:
        fake.set_account_script(str(account_id), script)


async def _latency(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.latency = Latency(**data)


async def _settings(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    settings = dict(data)
    if "rotate_refresh_tokens" in settings:
        fake.tokens.rotate_refresh = bool(settings.pop("rotate_refresh_tokens"))
    if "access_ttl_s" in settings:
        fake.tokens.access_ttl_s = int(settings.pop("access_ttl_s"))
    if "models_page_size" in settings:
        fake.models_page_size = int(settings.pop("models_page_size"))
    if settings:
        raise KeyError(", ".join(settings))


async def _device_flow(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fields = dict(data)
    if "outcome" in fields:
        fields["outcome"] = DeviceOutcome(fields["outcome"])
    fake.set_device_flow(DeviceFlow(**fields))


async def _model(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fields = dict(data)
    fields["input_types"] = tuple(fields.get("input_types", ("TEXT", "IMAGE")))
    fields["refusal_fallback_models"] = tuple(fields.get("refusal_fallback_models", ()))
    fake.set_model(Model(**fields))


async def _oversize(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.oversize(str(data["operation"]), int(data["bytes"]))


async def _issue_account(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    options = dict(data or {})
    kind = AuthKind(options.pop("kind", "social"))
    issue = {
        AuthKind.SOCIAL: fake.issue_social_account,
        AuthKind.IDC: fake.issue_idc_account,
        AuthKind.API_KEY: fake.issue_api_key_account,
        AuthKind.EXTERNAL_IDP: fake.issue_external_idp_account,
    }[kind]
    return issue(**options).to_json()


async def _accounts(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    return {
        "accounts": [
            {
                "account_id": account.account_id,
                "kind": account.kind.value,
                "provider": account.provider,
                "profile_arn": account.profile_arn,
                "suspended": account.suspended,
                "egress_gated": account.egress_gated,
                "usage": dataclasses.asdict(account.usage),
            }
            for account in fake.tokens.accounts()
        ]
    }


async def _usage(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fields = dict(data)
    account_id = fields.pop("account_id")
    if "bonuses" in fields:
        fields["bonuses"] = tuple(Bonus(**bonus) for bonus in fields["bonuses"])
    if fields.get("free_trial") is not None:
        fields["free_trial"] = FreeTrial(**fields["free_trial"])
    return dataclasses.asdict(fake.set_usage(account_id, **fields))


async def _suspension(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.suspend_account(data["account_id"], bool(data.get("suspended", True)))


async def _listed_windows(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.set_listed_windows(data["account_id"], bool(data.get("listed", True)))


async def _egress(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.gate_egress(data["account_id"], bool(data.get("gated", True)))


async def _drift(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.set_drifts(*(Drift[name] for name in data["drifts"]))


async def _expire(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    if "access_token" in data:
        fake.expire_access_token(data["access_token"])
    else:
        fake.expire_account_tokens(data["account_id"])


async def _revoke(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.revoke_refresh_token(data["refresh_token"])


async def _requests(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    operation = request.query.get("operation")
    return {"requests": [record.to_json() for record in fake.requests(operation)]}


async def _clear_requests(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    fake.clear_requests()


async def _counters(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    return fake.counters()


async def _secrets(fake: FakeKiro, request: web.Request, data: Any) -> Any:
    return {"secrets": list(fake.issued_secrets())}

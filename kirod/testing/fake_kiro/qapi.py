"""The Q API's operations besides chat: usage limits, the overage preference, the model
catalog, profiles, and MCP (the web search tool, scripted in `search.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kirod.testing.fake_kiro.catalog import (
    InvalidNextToken,
    claude,
    models_page,
    with_catalog_drift,
)
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.search import (
    INVALID_PARAMS,
    WEB_SEARCH_TOOL,
    SearchFault,
    query_problem,
    search_text,
)
from kirod.testing.fake_kiro.state import FakeKiro, RecordedRequest
from kirod.testing.fake_kiro.tokens import Account, AuthKind
from kirod.testing.fake_kiro.usage import with_usage_drift
from kirod.testing.fake_kiro.wire import as_dict, error, json_object, signed_in


@signed_in
async def get_usage_limits(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    params: dict[str, Any] = dict(request.query)
    params.update(json_object(record.body))
    profile_arn = params.get("profileArn")
    if request.path.rstrip("/") == "" and not profile_arn:
        return error(400, {"message": "Invalid profileArn."}, "ValidationException")
    if profile_arn and profile_arn != account.profile_arn:
        body = {"message": "User is not authorized to access this feature."}
        return error(403, body, "AccessDeniedException")
    email = account.email if str(params.get("isEmailRequired")).lower() == "true" else None
    now = fake.tokens.now()
    doc = account.usage.to_json(email=email, user_id=account.user_id, now=now)
    if Drift.USAGE_FIELD in fake.drifts:
        doc = with_usage_drift(doc)
    return web.json_response(doc)


OVERAGE_REFUSED_BODY = {"message": "User is not authorized to access this feature."}
"""A Free plan's setUserPreference answer. Peers report only its status
(docs/KIRO-PROTOCOL.md §6.5); the body is the one of getUsageLimits' 403
(docs/KIRO-PROTOCOL.md §6.1)."""


@signed_in
async def set_user_preference(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    """setUserPreference: the overage switch, kept per account and reported by getUsageLimits."""
    body = json_object(record.body)
    status = as_dict(body.get("overageConfiguration")).get("overageStatus")
    if status not in ("ENABLED", "DISABLED"):
        invalid = {"message": "overageStatus must be ENABLED or DISABLED."}
        return error(400, invalid, "ValidationException")
    profile_arn = body.get("profileArn")
    if profile_arn is not None and profile_arn != account.profile_arn:
        other = {"message": "User is not authorized to make this call."}
        return error(403, other, "AccessDeniedException")
    if not account.usage.overage_capable:
        return error(403, OVERAGE_REFUSED_BODY, "AccessDeniedException")
    fake.set_usage(account.account_id, overage_status=status)
    return web.json_response({})


@signed_in
async def list_available_models(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    params: dict[str, Any] = dict(request.query)
    params.update(json_object(record.body))
    free = "FREE" in account.usage.subscription
    models = [model for model in fake.models() if not (free and model.premium)]
    if account.egress_gated:  # no Claude model from there (FakeKiro.gate_egress)
        models = [model for model in models if not claude(model)]
    try:
        max_results = int(params.get("maxResults", fake.models_page_size))
        page = models_page(models, next_token=params.get("nextToken"), max_results=max_results)
    except (ValueError, InvalidNextToken):
        return error(400, {"message": "Invalid pagination parameters."}, "ValidationException")
    if Drift.CATALOG_FIELD in fake.drifts:
        page = with_catalog_drift(models, page)
    return web.json_response(page)


def _profile_name(account: Account) -> str:
    return "Social_Default_Profile" if account.kind is AuthKind.SOCIAL else "QDefaultProfile"


@signed_in
async def list_available_profiles(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    if account.kind is AuthKind.API_KEY:
        # A `ksk_` key cannot list profiles in any region; GetProfile names its one
        # (docs/UPSTREAM.md §5.3).
        return error(403, {"message": "Unsupported token type"}, "AccessDeniedException")
    name = _profile_name(account)
    # Regional: a host lists only its own region's profiles, one per page.
    arns = [
        arn
        for arn in account.profiles()
        if record.region is None or arn.split(":")[3] == record.region
    ]
    start = int(token) if (token := json_object(record.body).get("nextToken")) else 0
    page = [
        {"arn": arn, "profileName": name if arn == account.profile_arn else f"Profile{i}"}
        | {"status": "ACTIVE"}
        for i, arn in enumerate(arns[start : start + 1], start)
    ]
    answer: dict[str, Any] = {"profiles": page}
    if start + 1 < len(arns):
        answer["nextToken"] = str(start + 1)
    return web.json_response(answer)


@signed_in
async def get_profile(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    """GetProfile: the caller's own profile, from the host of its region (a 403 elsewhere)."""
    if record.region is not None and account.profile_arn.split(":")[3] != record.region:
        return error(403, {"message": "User is not authorized."}, "AccessDeniedException")
    profile = {
        "arn": account.profile_arn,
        "profileName": _profile_name(account),
        "status": "ACTIVE",
    }
    return web.json_response({"profile": profile})


@signed_in
async def invoke_mcp(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.Response:
    """JSON-RPC `tools/list`, and `tools/call` of `web_search` (`search.py`)."""
    call = json_object(record.body)
    profile_arn = call.get("profileArn")
    if profile_arn is None and account.kind is AuthKind.SOCIAL:
        body = {"message": "profileArn is required for this request.", "reason": None}
        return error(400, body, "ValidationException")
    if profile_arn is not None and profile_arn != account.profile_arn:
        return error(403, {"message": "User is not authorized."}, "AccessDeniedException")
    reply: dict[str, Any] = {"id": call.get("id"), "jsonrpc": "2.0"}
    params = as_dict(call.get("params"))
    arguments = as_dict(params.get("arguments"))
    if call.get("method") == "tools/list":
        reply["result"] = {"tools": [WEB_SEARCH_TOOL]}
        return web.json_response(reply)
    if call.get("method") != "tools/call" or params.get("name") != "web_search":
        reply["error"] = {"code": -32601, "message": "Method not found"}
        return web.json_response(reply)
    if problem := query_problem(arguments.get("query")):
        fake.count("search_refused")
        reply["error"] = {"code": INVALID_PARAMS, "message": problem}
        return web.json_response(reply)
    script = fake.next_search()
    if script.fault is not None:
        fake.count(f"search_fault:{script.fault.value}")
    if script.delay_s or script.fault is SearchFault.SLOW:
        await asyncio.sleep(script.delay_s)
    match script.fault:
        case SearchFault.FORBIDDEN:
            return error(403, {"message": "User is not authorized."}, "AccessDeniedException")
        case SearchFault.SERVER_ERROR:
            return error(500, {"message": "Internal error."}, "InternalServerException")
        case SearchFault.MALFORMED:
            return web.Response(text="<html>not json-rpc", content_type="application/json")
        case SearchFault.RPC_ERROR:
            reply["error"] = {"code": -32603, "message": "Internal error"}
            return web.json_response(reply)
    text = search_text(script, str(arguments.get("query", "")))
    is_error = script.fault is SearchFault.TOOL_ERROR
    reply["result"] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    fake.count("searches")
    return web.json_response(reply)

"""The fake's chat (GenerateAssistantResponse): the body checked against Kiro's rules
(`validate.py`), what the account forbids, then the next script streamed as event-stream frames.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from kirod.testing.fake_kiro.catalog import Model, claude, with_window_drift
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.script import (
    ChatRequest,
    Cut,
    Fault,
    Pause,
    Script,
    StreamPlan,
    drifted_failure,
    http_failure,
    plan_stream,
    suspended_body,
)
from kirod.testing.fake_kiro.state import FakeKiro, RecordedRequest
from kirod.testing.fake_kiro.tokens import Account
from kirod.testing.fake_kiro.validate import RULES, validate_chat
from kirod.testing.fake_kiro.wire import error, signed_in

EVENTSTREAM_CONTENT_TYPE = "application/vnd.amazon.eventstream"


@signed_in
async def generate_assistant_response(
    fake: FakeKiro, request: web.Request, record: RecordedRequest, account: Account
) -> web.StreamResponse:
    models = {model.model_id: _on_account(fake, model, account) for model in fake.models()}
    rejection = validate_chat(record.body, models)
    if rejection is not None:
        record.rejected_by = rejection.rule
        fake.count(f"rejected:{rejection.rule}")
        return error(rejection.status, rejection.body, rejection.error_type)
    root = json.loads(record.body)
    model = models[root["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]]
    refusal = _account_refusal(account, root, model, record.region) or _drifted_schema(
        fake.drifts, root
    )
    if refusal is not None:
        return refusal
    script = fake.next_script(account.account_id)
    if script.fault is not None:
        fake.count(f"fault:{script.fault.name}")
    failure = drifted_failure(fake.drifts) or http_failure(script, account.user_id)
    if failure is not None:
        return error(failure.status, failure.body, failure.error_type, failure.headers)
    plan = plan_stream(script, ChatRequest.parse(root, model), fake.latency, fake.drifts)

    def charge() -> None:
        fake.tokens.update_account(
            account.account_id,
            lambda current: dataclasses.replace(current, usage=current.usage.consume(plan.credits)),
        )

    response, completed = await _stream(request, plan, charge if plan.credits else None)
    if completed:
        fake.count("streams_completed")
    return response


def _on_account(fake: FakeKiro, model: Model, account: Account) -> Model:
    """The model as the account has it: the listed window where the 1M rollout has not come;
    under `Drift.WINDOW`, a Claude model's grown window on every account."""
    if account.listed_windows:
        model = dataclasses.replace(model, window=None)
    return with_window_drift(model) if Drift.WINDOW in fake.drifts else model


def _account_refusal(
    account: Account, root: Mapping[str, Any], model: Model, host_region: str | None
) -> web.Response | None:
    """What the account itself forbids: suspension, wrong region or profile, plan, quota."""
    if account.suspended:
        return error(403, suspended_body(account.user_id), "AccessDeniedException")
    profile_arn = root.get("profileArn")
    arn_region = profile_arn.split(":")[3:4] if isinstance(profile_arn, str) else None
    if host_region is not None and arn_region is not None and arn_region != [host_region]:
        # A profile of another region sent to this region's host (docs/UPSTREAM.md §5.2).
        return error(400, {"message": "Improperly formed request."}, "ValidationException")
    if profile_arn is None:
        # Every login kind: the q.{region} hosts want the ARN on each chat (docs/UPSTREAM.md §5.2).
        body = {"message": "profileArn is required for this request."}
        return error(400, body, "ValidationException")
    if profile_arn != account.profile_arn:
        body = {"message": "User is not authorized to make this call."}
        return error(403, body, "AccessDeniedException")
    if account.refuses_request_fields and "additionalModelRequestFields" in root:
        return error(400, RULES["request_fields_without_schema"].body, "ValidationException")
    if model.premium and "FREE" in account.usage.subscription:
        return error(400, RULES["invalid_model_id"].body, "ValidationException")
    if account.egress_gated and claude(model):  # FakeKiro.gate_egress, with Kiro's own words
        return error(400, RULES["invalid_model_id"].body, "ValidationException")
    reason = account.usage.refusal()
    if reason == "MONTHLY_REQUEST_COUNT":
        failure = http_failure(Script(fault=Fault.QUOTA_402), account.user_id)
        assert failure is not None
        return error(failure.status, failure.body, failure.error_type)
    if reason is not None:
        # The overage cap reached: a ServiceQuotaExceededException, 402 in Kiro's service model,
        # in the words kiro.rs tests with (docs/KIRO-PROTOCOL.md §6.5).
        body = {"message": "You have reached the limit for overages.", "reason": reason}
        return error(402, body, "ServiceQuotaExceededException")
    return None


def _drifted_schema(drifts: frozenset[Drift], root: Mapping[str, Any]) -> web.Response | None:
    """Tomorrow's schema (`Drift.SCHEMA_REFUSAL`): root fields that today's schema takes refused.

    Schemas have dropped what kirod sends before: the 4.5 generation and some external-IdP
    accounts refuse the root field itself, and each schema is enforced strictly, naming the key it
    lacks (docs/KIRO-PROTOCOL.md §2.6: sunerpy's Opus 5.5 probe, 2026-09-26). Here the first key
    sent, at its deepest, is refused in Kiro's words.
    """
    fields = root.get("additionalModelRequestFields")
    if Drift.SCHEMA_REFUSAL not in drifts or not isinstance(fields, dict) or not fields:
        return None
    key, value = next(iter(fields.items()))
    while isinstance(value, dict) and value:
        key, value = next(iter(value.items()))
    message = (
        f"Invalid additionalModelRequestFields: property '{key}' is not defined in the schema "
        "and the schema does not allow additional properties"
    )
    return error(400, {"message": message, "reason": "REQUEST_BODY_INVALID"}, "ValidationException")


async def _stream(
    request: web.Request, plan: StreamPlan, charge: Callable[[], None] | None
) -> tuple[web.StreamResponse, bool]:
    """Write the plan's frames with its delays; return whether the body was completed.

    A whole answer is charged (`charge`) as its last frame, the `meteringEvent` that reports the
    charge, is written (docs/KIRO-PROTOCOL.md §3.4: the tail ends every complete answer), so the
    charge is there before its client can read the answer's end."""
    response = web.StreamResponse(headers={"x-amzn-RequestId": str(uuid.uuid4())})
    response.content_type = EVENTSTREAM_CONTENT_TYPE
    last = plan.steps[-1] if plan.steps else None
    try:
        await response.prepare(request)
        for step in plan.steps:
            if step is last and charge is not None:
                charge()
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

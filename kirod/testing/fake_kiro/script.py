"""The fake's deterministic model: what it answers to a chat request, and how it misbehaves.

A `Script` is one scripted answer: a `Reply` (what the model says), how it is delivered (chunk
size, delays) and an optional `Fault`. `plan_stream` turns it into the exact frames to send,
as a pure function, so the wire shape can be asserted without a server. Event order and shapes
follow docs/KIRO-PROTOCOL.md §3.2 to §3.4; the faults are the misbehaviours of
docs/KIRO-PROTOCOL.md §3.3 and §4.2.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import json
import math
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kirod.testing.fake_kiro.catalog import Model
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.eventstream import (
    corrupt_crc,
    encode_error,
    encode_event,
    encode_exception,
)
from kirod.testing.fake_kiro.validate import THINKING_TAG, estimate_tokens, reasoning_signature

DEFAULT_PROMPT_ECHO = 200
"""The default reply repeats this many characters of the prompt."""


class Fault(enum.Enum):
    """Scriptable upstream misbehaviours; the value says what the client receives."""

    QUOTA_402 = "402 MONTHLY_REQUEST_COUNT"
    OVERAGE_400 = "400 ServiceQuotaExceededException OVERAGE_REQUEST_LIMIT_EXCEEDED"
    IMPROPERLY_FORMED_400 = "400 Improperly formed request, no reason: a body Kiro cannot take"
    THROTTLE_429 = "429 ThrottlingException for `throttle_reason`, `retry_after_s` in its body"
    THROTTLE_429_NO_RETRY_AFTER = "429 ThrottlingException without any wait"
    CAPACITY_429 = "429 INSUFFICIENT_MODEL_CAPACITY"
    SUSPICIOUS_429 = "429 suspicious activity: the account is limited (`retry_after_s` sent)"
    SUSPENDED_403 = "403 AccessDeniedException TEMPORARILY_SUSPENDED"
    BEARER_INVALID_403 = "403 bearer token invalid (server-side expiry)"
    SERVER_500 = "500 MODEL_TEMPORARILY_UNAVAILABLE"
    INTERNAL_500 = "500 generic unexpected error"
    MIDSTREAM_EXCEPTION = "exception frame of `exception_type` after `fault_at` frames, no tail"
    ERROR_FRAME = "unmodelled error frame after `fault_at` frames, no tail"
    TRUNCATED_TOOL_INPUT = "last tool call's input stops mid-JSON: no stop, no tail frames"
    CORRUPT_CRC = "frame number `fault_at` has a damaged message CRC"
    EMPTY_STREAM = "200 with zero frames"
    CONNECTION_CUT = "connection closed inside the frame after `fault_at` frames"
    DUPLICATED_DELTAS = "text delta number `fault_at` is sent twice"
    LEAKED_TOOL_CALL_TEXT = "tool calls written as `[Called X with args: {...}]` text"
    STALL = "pause `stall_s` seconds after `fault_at` frames, then finish"
    # Cut generations and the stated stops of today's tail (docs/KIRO-PROTOCOL.md §3.4; yupanzi/
    # kiro2claude docs/PITFALLS.md "帧边界 EOF", 2026-09-07/08; the StopReason enum in
    # mikeyobrien/pi-provider-kiro src/stop-reason.ts, 2026).
    CUT_GENERATION = "a clean end on a frame boundary after `fault_at` content frames, no tail"
    CONTENT_FILTERED = (
        "no content: metadataEvent {stopReason: CONTENT_FILTERED, stopDetails.refusal}, the tail"
    )
    CONTEXT_WINDOW_EXCEEDED = (
        "no content: metadataEvent {stopReason: MODEL_CONTEXT_WINDOW_EXCEEDED}, the tail"
    )
    THROTTLE_429_RETRY_AFTER_HEADER = "429 ThrottlingException, `retry_after_s` in a Retry-After"
    CONVERSATION_LIMIT_402 = "402 ServiceQuotaExceededException CONVERSATION_LIMIT_EXCEEDED"


class ToolCut(enum.Enum):
    """How Kiro cuts one tool call off, after part of its input (docs/UPSTREAM.md §3.5)."""

    END = "the stream ends: no stop, no tail frames"
    SILENCE = "`stall_s` of silence, then the connection is cut"
    UNPARSEABLE_STOP = "`stop: true` after the partial input; the answer goes on"
    EXCEPTION = "an exception frame of `exception_type`, no tail"
    MAX_TOKENS = "a metadataEvent {stopReason: MAX_TOKENS}, then the tail"


@dataclass(frozen=True)
class ToolCall:
    """One tool call. `fragments`, when given, are sent verbatim as the input deltas (they need
    not be valid JSON); otherwise the compact JSON of `arguments` is split by the chunk size, or
    sent as growing objects when `as_objects` (each frame's `input` the whole input so far).
    `cut` cuts the call off after `cut_after` characters of its input (objects: snapshots;
    default half); calls after it are not sent, except after `UNPARSEABLE_STOP`."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    fragments: tuple[str, ...] | None = None
    tool_use_id: str | None = None
    as_objects: bool = False
    cut: ToolCut | None = None
    cut_after: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "fragments": None if self.fragments is None else list(self.fragments),
            "tool_use_id": self.tool_use_id,
            "as_objects": self.as_objects,
            "cut": None if self.cut is None else self.cut.name,
            "cut_after": self.cut_after,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolCall:
        fragments, cut = data.get("fragments"), data.get("cut")
        return cls(
            name=data["name"],
            arguments=data.get("arguments", {}),
            fragments=None if fragments is None else tuple(fragments),
            tool_use_id=data.get("tool_use_id"),
            as_objects=bool(data.get("as_objects", False)),
            cut=None if cut is None else ToolCut[cut],
            cut_after=data.get("cut_after"),
        )


@dataclass(frozen=True)
class TokenUsage:
    """`metadataEvent.tokenUsage` as AWS's model shapes it (docs/UPSTREAM.md §1.4): `uncached`
    excludes the cache reads and writes. Sent only when a reply scripts it: whether Kiro sends
    it on Claude streams is disputed (ZyphrZero/kiro.rs 0.7.6 parses it; dwgx/KiroStudio
    src/kiro/model/events/metadata.rs, 2026, measured a `metadataEvent` with `stopReason` only),
    and counts that win over every estimate would change what the rest of the suite measures."""

    uncached: int
    output: int
    cache_read: int = 0
    cache_write: int = 0

    def wire(self) -> dict[str, int]:
        total = self.uncached + self.cache_read + self.cache_write + self.output
        return {
            "uncachedInputTokens": self.uncached,
            "outputTokens": self.output,
            "totalTokens": total,
            "cacheReadInputTokens": self.cache_read,
            "cacheWriteInputTokens": self.cache_write,
        }

    def to_json(self) -> dict[str, int]:
        return {
            "uncached": self.uncached,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
        }


@dataclass(frozen=True)
class Reply:
    """What the model says. `thinking` is only emitted when the request asked for it (prompt
    tags or native reasoning). `credits` and `context_usage` (a percentage) default to values
    derived from the request and the model; `token_usage`, when given, adds a `metadataEvent`."""

    text: str = ""
    thinking: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    credits: float | None = None
    context_usage: float | None = None
    token_usage: TokenUsage | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "thinking": self.thinking,
            "tool_calls": [call.to_json() for call in self.tool_calls],
            "credits": self.credits,
            "context_usage": self.context_usage,
            "token_usage": None if self.token_usage is None else self.token_usage.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        calls = tuple(ToolCall.from_json(call) for call in data.get("tool_calls", ()))
        usage = data.get("token_usage")
        token_usage = None if usage is None else TokenUsage(**usage)
        return cls(**{**data, "tool_calls": calls, "token_usage": token_usage})


@dataclass(frozen=True)
class Latency:
    """Delivery timing: before the first frame, and between frames (benchmarks set these)."""

    first_s: float = 0.0
    between_s: float = 0.0


@dataclass(frozen=True)
class Script:
    """One scripted answer. `reply=None` means the default echo of the prompt; delays of None
    use the fake's latency profile; `fault_at`, `exception_type`, `retry_after_s` and `stall_s`
    parameterize the faults that mention them."""

    reply: Reply | None = None
    fault: Fault | None = None
    chunk_size: int = 8
    delay_first_s: float | None = None
    delay_between_s: float | None = None
    fault_at: int = 1
    exception_type: str = "ThrottlingException"
    retry_after_s: int = 2
    stall_s: float = 2.0
    call_first: ToolCall | None = None  # answer this call until the request carries a result
    throttle_reason: str = "CREDIT_CONSUMPTION_RATE_EXCEEDED"  # THROTTLE_429's reason

    def __post_init__(self) -> None:
        if self.chunk_size < 1 or self.fault_at < 0:
            raise ValueError("chunk_size must be >= 1 and fault_at >= 0")

    def to_json(self) -> dict[str, Any]:
        return {
            "reply": None if self.reply is None else self.reply.to_json(),
            "fault": None if self.fault is None else self.fault.name,
            "chunk_size": self.chunk_size,
            "delay_first_s": self.delay_first_s,
            "delay_between_s": self.delay_between_s,
            "fault_at": self.fault_at,
            "exception_type": self.exception_type,
            "retry_after_s": self.retry_after_s,
            "stall_s": self.stall_s,
            "call_first": None if self.call_first is None else self.call_first.to_json(),
            "throttle_reason": self.throttle_reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Script:
        reply, fault, call = data.get("reply"), data.get("fault"), data.get("call_first")
        return cls(
            **{
                **data,
                "reply": None if reply is None else Reply.from_json(reply),
                "fault": None if fault is None else Fault[fault],
                "call_first": None if call is None else ToolCall.from_json(call),
            }
        )


@dataclass(frozen=True)
class ChatRequest:
    """What an answer depends on, read from a body that passed validation."""

    model: Model
    prompt: str
    tool_results: str
    thinking_tags: bool
    native_reasoning: bool
    estimated_tokens: int
    seed: str
    has_tool_results: bool = False
    tools: tuple[str, ...] = ()  # the declared tool names, which a signature binds
    effort: str | None = None  # the root effort the model honoured

    @classmethod
    def parse(cls, root: Mapping[str, Any], model: Model) -> ChatRequest:
        state = root["conversationState"]
        user = state["currentMessage"]["userInputMessage"]
        history = state.get("history", [])
        user_texts = [
            entry["userInputMessage"].get("content", "")
            for entry in history
            if "userInputMessage" in entry
        ]
        results = user.get("userInputMessageContext", {}).get("toolResults", [])
        result_text = " ".join(
            block["text"]
            for result in results
            for block in result.get("content", [])
            if "text" in block
        )
        fields = root.get("additionalModelRequestFields") or {}
        via_fields = ("output_config" in fields or "reasoning" in fields) and fields.get(
            "thinking", {}
        ).get("type") != "disabled"
        # Claude ignores `userInputMessage.reasoning` (see `Model.honors_reasoning_effort`).
        via_effort = "reasoning" in user and model.honors_reasoning_effort
        effort = (fields.get("output_config") or fields.get("reasoning") or {}).get("effort")
        declared = user.get("userInputMessageContext", {}).get("tools", [])
        prompt = user.get("content", "")
        seed_source = f"{state.get('conversationId')}|{len(history)}|{prompt}"
        return cls(
            model=model,
            prompt=prompt,
            tool_results=result_text,
            thinking_tags=any(THINKING_TAG in text for text in [*user_texts, prompt]),
            native_reasoning=via_fields or via_effort,
            estimated_tokens=estimate_tokens(state),
            seed=hashlib.sha256(seed_source.encode()).hexdigest(),
            has_tool_results=bool(results),
            tools=tuple(tool["toolSpecification"]["name"] for tool in declared),
            effort=effort,
        )


def default_reply(request: ChatRequest) -> Reply:
    """The reply when nothing is scripted: an echo, so runs are reproducible."""
    said = request.prompt or f"(tool results) {request.tool_results}"
    return Reply(
        text=f"You said: {said[:DEFAULT_PROMPT_ECHO]}",
        thinking=f"The user wrote {len(said)} characters; I will echo them.",
    )


DEFAULT_TOOL_CALL = ToolCall(
    "write_file", {"path": "notes.md", "content": "All work and no play. " * 40}
)
"""Used by the faults that need a tool call when the reply has none."""


@dataclass(frozen=True)
class Send:
    """Write one frame (or a damaged one) after waiting `delay_s`."""

    data: bytes
    delay_s: float = 0.0


@dataclass(frozen=True)
class Pause:
    """Send nothing for `seconds`."""

    seconds: float


@dataclass(frozen=True)
class Cut:
    """Write these bytes (part of a frame), then close the connection without finishing."""

    data: bytes


Step = Send | Pause | Cut


@dataclass(frozen=True)
class StreamPlan:
    """The exact response body; `credits` are charged to the account if it completes."""

    steps: tuple[Step, ...]
    credits: float


@dataclass(frozen=True)
class HttpFailure:
    """A scripted non-200 answer, shaped like the service's JSON errors
    (docs/KIRO-PROTOCOL.md §4.2)."""

    status: int
    body: Mapping[str, Any]
    error_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


def http_failure(script: Script, user_id: str) -> HttpFailure | None:
    """The error response for an HTTP-level fault, or None for streamed outcomes."""
    fault = script.fault
    body: dict[str, Any]
    if fault is Fault.QUOTA_402:
        body = {"message": "You have reached the limit.", "reason": "MONTHLY_REQUEST_COUNT"}
        return HttpFailure(402, body, "ServiceQuotaExceededException")
    if fault is Fault.OVERAGE_400:
        # Peers saw it as a 400 as well as a 402: the 400 is the one a status misreads.
        body = {
            "message": "You have reached the limit for overages.",
            "reason": "OVERAGE_REQUEST_LIMIT_EXCEEDED",
        }
        return HttpFailure(400, body, "ServiceQuotaExceededException")
    if fault is Fault.IMPROPERLY_FORMED_400:
        # Kiro's answer to a body it cannot take, whatever the cause: docs/KIRO-PROTOCOL.md §4.2.
        # For a refusal the validator has no rule for.
        body = {"message": "Improperly formed request.", "reason": None}
        return HttpFailure(400, body, "ValidationException")
    if fault is Fault.SUSPICIOUS_429:
        # With a Retry-After, as throttling may carry (docs/KIRO-PROTOCOL.md §4.2), which the
        # account's rest outlasts.
        retry = {"Retry-After": str(script.retry_after_s)}
        return HttpFailure(429, suspicious_body(user_id), "ThrottlingException", retry)
    if fault is Fault.THROTTLE_429:
        return HttpFailure(429, throttle_body(script), "ThrottlingException")
    if fault is Fault.THROTTLE_429_NO_RETRY_AFTER:
        body = {"message": "Too many requests, please wait before trying again.", "reason": None}
        return HttpFailure(429, body, "ThrottlingException")
    if fault is Fault.THROTTLE_429_RETRY_AFTER_HEADER:
        # The older form, the wait in a header and no reason (docs/KIRO-PROTOCOL.md §4.2: logs to
        # mid-2026), kept for an account that may still meet it.
        body = {"message": "Too many requests, please wait before trying again.", "reason": None}
        retry = {"Retry-After": str(script.retry_after_s)}
        return HttpFailure(429, body, "ThrottlingException", retry)
    if fault is Fault.CONVERSATION_LIMIT_402:
        # The conversation's context is full: a service-quota reason in Kiro's runtime model,
        # which kiro2claude answers by shrinking the conversation (yupanzi/kiro2claude
        # docs/PITFALLS.md, 2026-10-07; docs/KIRO-PROTOCOL.md §4.2). No live body was published:
        # the message is a stand-in, kirod reads the reason only.
        body = {
            "__type": f"{_KIRO_ERRORS}#ServiceQuotaExceededException",
            "message": "The conversation has exceeded its limit.",
            "reason": "CONVERSATION_LIMIT_EXCEEDED",
        }
        return HttpFailure(402, body, "ServiceQuotaExceededException")
    if fault is Fault.CAPACITY_429:
        body = {
            "__type": f"{_KIRO_ERRORS}#ThrottlingException",
            "message": "I am experiencing high traffic, please try again shortly.",
            "reason": "INSUFFICIENT_MODEL_CAPACITY",
        }
        return HttpFailure(429, body, "ThrottlingException")
    if fault is Fault.SUSPENDED_403:
        return HttpFailure(403, suspended_body(user_id), "AccessDeniedException")
    if fault is Fault.BEARER_INVALID_403:
        return HttpFailure(403, BEARER_INVALID_BODY, "AccessDeniedException")
    if fault is Fault.SERVER_500:
        body = {
            "message": "Encountered unexpectedly high load when processing the request, "
            "please try again.",
            "reason": "MODEL_TEMPORARILY_UNAVAILABLE",
        }
        return HttpFailure(500, body, "InternalServerException")
    if fault is Fault.INTERNAL_500:
        body = {
            "message": "Encountered an unexpected error when processing the request, "
            "please try again.",
            "reason": None,
        }
        return HttpFailure(500, body, "InternalServerException")
    return None


_KIRO_ERRORS = "com.amazon.kiro.runtimeservice"

DRIFTED_REASON = "TOKEN_BUCKET_EXHAUSTED"
"""The throttle reason of tomorrow's Kiro (`Drift.ERROR_REASON`): made up, in the enum's style."""
DRIFTED_STATUS = 422
"""The status of tomorrow's Kiro (`Drift.HTTP_STATUS`): one no Kiro endpoint was seen to send."""
DRIFTED_WAIT_S = 60


def drifted_failure(drifts: Collection[Drift]) -> HttpFailure | None:
    """A chat's error answer from tomorrow's Kiro, when one is switched on (`drift.Drift`)."""
    if Drift.HTTP_STATUS in drifts:
        # Kiro's statuses have moved before: the overage limit came as a 400 as well as a 402,
        # an invalid bearer as a 401 as well as a 403 (docs/KIRO-PROTOCOL.md §4.2). A type kirod
        # knows and no reason, so that only the status is new.
        body = {
            "__type": f"{_KIRO_ERRORS}#ValidationException",
            "message": "The request could not be processed.",
            "reason": None,
        }
        return HttpFailure(DRIFTED_STATUS, body, "ValidationException")
    if Drift.ERROR_REASON in drifts:
        # New reasons have come before: the throttling enum grew to six in 2026, and
        # MODEL_TEMPORARILY_UNAVAILABLE came as a 500 (docs/KIRO-PROTOCOL.md §4.1, §4.2); today's
        # body otherwise, the wait in `retryAfterMilliseconds`.
        script = Script(throttle_reason=DRIFTED_REASON, retry_after_s=DRIFTED_WAIT_S)
        return HttpFailure(429, throttle_body(script), "ThrottlingException")
    return None


def throttle_body(script: Script) -> dict[str, Any]:
    """A ThrottlingException as today's Kiro sends it: `__type`, a reason, and the wait in the
    body's `retryAfterMilliseconds`, with no Retry-After header (several independent gateway
    logs of 2026-08 to 2026-10, and yupanzi/kiro2claude's captures to 2026-10-07;
    docs/KIRO-PROTOCOL.md §4.2). `retry_after_s` 0 sends no wait. The reasons are the Kiro
    runtime service model's, as kiro2claude lists them (docs/KIRO-PROTOCOL.md §4.1)."""
    body: dict[str, Any] = {
        "__type": f"{_KIRO_ERRORS}#ThrottlingException",
        "message": "Too many requests, please wait before trying again.",
        "reason": script.throttle_reason,
    }
    if script.retry_after_s > 0:
        body["retryAfterMilliseconds"] = script.retry_after_s * 1000
    return body


BEARER_INVALID_BODY: Mapping[str, Any] = {
    "message": "The bearer token included in the request is invalid."
}


def suspended_body(user_id: str) -> dict[str, Any]:
    return {
        "message": f"Your User ID ({user_id}) temporarily is suspended. We've locked your account "
        "as a security precaution. To restore access, please contact our support team.",
        "reason": "TEMPORARILY_SUSPENDED",
    }


def suspicious_body(user_id: str) -> dict[str, Any]:
    """Kiro's limits on an account it flagged (kirodotdev/Kiro#8786, decolua/9router#1389)."""
    return {
        "message": "Due to suspicious activity, we are imposing temporary limits on how "
        f"frequently your account ({user_id}) can send a request to Kiro while we investigate. "
        "If you need assistance, please contact support at "
        "https://app.kiro.dev/account/usage?support_form.",
        "reason": None,
    }


REFUSAL_DETAILS: Mapping[str, Any] = {
    "refusal": {"category": "cyber", "explanation": "The request was declined."}
}
"""`metadataEvent.stopDetails` of a CONTENT_FILTERED answer: the shape of the service model's
`StopDetails.refusal` (category, explanation) as Rust gateways parse it; values made up."""


DRIFTED_EVENT = "turnSummaryEvent"
"""The event type of tomorrow's Kiro (`Drift.EVENT_TYPE`): made up, in the union's style."""
DRIFTED_STOP = "GUARDRAIL_INTERVENED"
"""The stop reason of tomorrow's Kiro (`Drift.STOP_REASON`): made up, in the enum's style."""


def plan_stream(
    script: Script,
    request: ChatRequest,
    latency: Latency,
    drifts: Collection[Drift] = frozenset(),
) -> StreamPlan:
    """The frames answering `request`, with the script's fault applied, and on an answer with
    no fault the stream's `drifts` (`drift.Drift`) that are switched on."""
    if script.fault is Fault.EMPTY_STREAM:
        return StreamPlan((), 0.0)
    if script.fault in (Fault.CONTENT_FILTERED, Fault.CONTEXT_WINDOW_EXCEEDED):
        # Stated stops with nothing before them; CONTENT_FILTERED "may come with an empty stream
        # and stopDetails.refusal" (kiro2claude docs/PITFALLS.md, 2026-09; pi-provider-kiro
        # src/stop-reason.ts). No capture shows MODEL_CONTEXT_WINDOW_EXCEEDED: its place here
        # is the enum's, the rest an assumption.
        stop: dict[str, Any] = {"stopReason": "CONTENT_FILTERED", "stopDetails": REFUSAL_DETAILS}
        if script.fault is Fault.CONTEXT_WINDOW_EXCEEDED:
            stop = {"stopReason": "MODEL_CONTEXT_WINDOW_EXCEEDED"}
        credits = _default_credits(request, "")
        return _timed(script, latency, _tail(request, "", credits, None, stop), credits)
    reply = script.reply or default_reply(request)
    if script.call_first is not None and not request.has_tool_results:
        # A tool loop, e.g. a web search kirod runs inside the turn: call, then answer.
        reply = Reply(tool_calls=(script.call_first,))
    fault = script.fault
    if fault in (Fault.TRUNCATED_TOOL_INPUT, Fault.LEAKED_TOOL_CALL_TEXT) and not reply.tool_calls:
        reply = replace(reply, tool_calls=(DEFAULT_TOOL_CALL,))
    content = _reasoning_frames(reply, request, script.chunk_size)
    text = reply.text
    if reply.thinking and request.thinking_tags and not request.native_reasoning:
        text = f"<thinking>{reply.thinking}</thinking>\n\n{text}"
    calls = reply.tool_calls
    if fault is Fault.LEAKED_TOOL_CALL_TEXT:
        text += "".join(f"[Called {c.name} with args: {_compact(c.arguments)}]" for c in calls)
        calls = ()
    deltas = _chunks(text, script.chunk_size)
    if fault is Fault.DUPLICATED_DELTAS and deltas:
        at = min(script.fault_at, len(deltas) - 1)
        deltas.insert(at, deltas[at])
    content += [encode_event("assistantResponseEvent", {"content": d}) for d in deltas]
    cut: ToolCut | None = None
    for index, call in enumerate(calls):
        if fault is Fault.TRUNCATED_TOOL_INPUT and index == len(calls) - 1:
            call = replace(call, cut=ToolCut.END)
        tool_use_id = call.tool_use_id or _tool_use_id(request.seed, index)
        content += _tool_frames(call, tool_use_id, script.chunk_size)
        if call.cut not in (None, ToolCut.UNPARSEABLE_STOP):
            cut = call.cut
            break
    if cut is ToolCut.END:
        return _timed(script, latency, content, 0.0)
    if cut is ToolCut.SILENCE:
        steps = _timed(script, latency, content, 0.0).steps
        return StreamPlan((*steps, Pause(script.stall_s), Cut(b"")), 0.0)
    if cut is ToolCut.EXCEPTION:
        message = f"Fake Kiro scripted {script.exception_type}."
        exception = encode_exception(script.exception_type, message)
        return _timed(script, latency, [*content, exception], 0.0)
    credits = reply.credits if reply.credits is not None else _default_credits(request, text)
    reason = "MAX_TOKENS" if cut is ToolCut.MAX_TOKENS else "TOOL_USE" if calls else "END_TURN"
    metadata: dict[str, Any] = {"stopReason": reason}
    if reply.token_usage is not None:
        metadata["tokenUsage"] = reply.token_usage.wire()
    if fault is None and Drift.STOP_REASON in drifts:
        # The StopReason enum has gained values before (PAUSE_TURN, MODEL_CONTEXT_WINDOW_EXCEEDED:
        # docs/KIRO-PROTOCOL.md §3.4); a new one in metadataEvent, the rest of the tail as today.
        metadata["stopReason"] = DRIFTED_STOP
    tail = _tail(request, text, credits, reply.context_usage, metadata)
    at = min(script.fault_at, len(content))
    if fault is Fault.CUT_GENERATION:
        # Generation stops mid-answer and the stream closes cleanly on a frame boundary, without
        # the tail (kiro2claude docs/PITFALLS.md "帧边界 EOF", 2026-09-07): some content first.
        return _timed(script, latency, content[: max(1, at)], 0.0)
    if fault is Fault.MIDSTREAM_EXCEPTION:
        message = f"Fake Kiro scripted {script.exception_type}."
        return _timed(
            script, latency, [*content[:at], encode_exception(script.exception_type, message)], 0.0
        )
    if fault is Fault.ERROR_FRAME:
        error = encode_error("InternalFailure", "Fake Kiro scripted error frame.")
        return _timed(script, latency, [*content[:at], error], 0.0)
    if fault is None and drifts:
        return _drifted(script, latency, content, tail, credits, drifts)
    frames = content + tail
    if fault is Fault.CORRUPT_CRC:
        bad = min(script.fault_at, len(frames) - 1)
        frames[bad] = corrupt_crc(frames[bad])
    if fault is Fault.CONNECTION_CUT:
        steps = _timed(script, latency, frames[:at], 0.0).steps
        return StreamPlan((*steps, Cut(frames[at][: len(frames[at]) // 2])), 0.0)
    plan = _timed(script, latency, frames, credits)
    if fault is Fault.STALL:
        return replace(plan, steps=(*plan.steps[:at], Pause(script.stall_s), *plan.steps[at:]))
    return plan


def _drifted(
    script: Script,
    latency: Latency,
    content: list[bytes],
    tail: list[bytes],
    credits: float,
    drifts: Collection[Drift],
) -> StreamPlan:
    """A whole answer as tomorrow's Kiro may send it."""
    if Drift.TAIL_MISSING in drifts:
        # Every content frame, then a clean end without the tail: cut generations end there
        # half way (docs/KIRO-PROTOCOL.md §3.4: kiro2claude's audit, 2026-09-07/08); this one
        # ends after the last content frame, where only the missing tail tells it apart.
        return _timed(script, latency, content, 0.0)
    if Drift.EVENT_TYPE in drifts:
        # The stream's union has gained event types before (reasoningContentEvent with native
        # reasoning, and the rare ones peers skip: docs/KIRO-PROTOCOL.md §3.2); a new one just
        # before the tail, its members an id and a count.
        summary = {"turnId": str(uuid.uuid4()), "blockCount": len(content)}
        content = [*content, encode_event(DRIFTED_EVENT, summary)]
    return _timed(script, latency, content + tail, credits)


def _tail(
    request: ChatRequest,
    output: str,
    credits: float,
    percentage: float | None,
    metadata: dict[str, Any],
) -> list[bytes]:
    """The frames that end every complete answer, in this order: `metadataEvent`,
    `contextUsageEvent`, `meteringEvent` (kiro2claude docs/PITFALLS.md "帧边界 EOF": 351 of 352
    real responses, 2026-09-07, and 372 of 376, 2026-09-08, the others all failures)."""
    usage = context_usage(request, output) if percentage is None else percentage
    return [
        encode_event("metadataEvent", metadata),
        encode_event("contextUsageEvent", {"contextUsagePercentage": usage}),
        encode_event(
            "meteringEvent", {"unit": "credit", "unitPlural": "credits", "usage": credits}
        ),
    ]


def _timed(script: Script, latency: Latency, frames: list[bytes], credits: float) -> StreamPlan:
    first = latency.first_s if script.delay_first_s is None else script.delay_first_s
    between = latency.between_s if script.delay_between_s is None else script.delay_between_s
    steps = tuple(Send(frame, first if i == 0 else between) for i, frame in enumerate(frames))
    return StreamPlan(steps, credits)


def _reasoning_frames(reply: Reply, request: ChatRequest, chunk_size: int) -> list[bytes]:
    """Native reasoning: text deltas then a signature (Claude), or one opaque blob (GPT)."""
    if not (reply.thinking and request.native_reasoning):
        return []
    if request.model.redacted_reasoning:
        blob = base64.b64encode(reply.thinking.encode("utf-8")).decode("ascii")
        return [encode_event("reasoningContentEvent", {"redactedContent": blob})]
    frames = [
        encode_event("reasoningContentEvent", {"text": chunk})
        for chunk in _chunks(reply.thinking, chunk_size)
    ]
    signature = reasoning_signature(reply.thinking, request.tools)
    return [*frames, encode_event("reasoningContentEvent", {"signature": signature})]


def _tool_frames(call: ToolCall, tool_use_id: str, chunk_size: int) -> list[bytes]:
    """Open frame, input fragments, `stop:true`, each repeating name and id
    (docs/KIRO-PROTOCOL.md §3.3)."""
    head = {"name": call.name, "toolUseId": tool_use_id}
    if call.fragments is None and not call.arguments and call.cut is None:
        return [encode_event("toolUseEvent", {**head, "input": "", "stop": True})]
    inputs: list[Any]
    if call.as_objects:
        inputs = _snapshots(call.arguments, chunk_size)
        if call.cut is not None:
            inputs = inputs[: _kept(len(inputs), call.cut_after)]
    else:
        fragments = call.fragments
        whole = "".join(fragments) if fragments is not None else _compact(call.arguments)
        inputs = list(fragments) if fragments is not None else _chunks(whole, chunk_size)
        if call.cut is not None:
            inputs = _chunks(whole[: _kept(len(whole), call.cut_after)], chunk_size)
    frames = [encode_event("toolUseEvent", {**head, "input": {} if call.as_objects else ""})]
    frames += [encode_event("toolUseEvent", {**head, "input": i}) for i in inputs]
    if call.cut in (None, ToolCut.UNPARSEABLE_STOP):
        frames.append(encode_event("toolUseEvent", {**head, "stop": True}))
    return frames


def _kept(size: int, cut_after: int | None) -> int:
    """How much of a cut call's input is sent: `cut_after`, or half of it (at least 1)."""
    return max(1, size // 2) if cut_after is None else cut_after


def _snapshots(arguments: Mapping[str, Any], chunk_size: int) -> list[dict[str, Any]]:
    """The input as it grows: one more key at a time, long strings `chunk_size` at a time."""
    items = list(arguments.items())
    snapshots: list[dict[str, Any]] = []
    for count, (key, value) in enumerate(items):
        head = dict(items[:count])
        if isinstance(value, str):
            ends = range(chunk_size, len(value), chunk_size)
            snapshots += [{**head, key: value[:end]} for end in ends]
        snapshots.append({**head, key: value})
    return snapshots


def _tool_use_id(seed: str, index: int) -> str:
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()[:16]
    return "tooluse_" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def context_usage(request: ChatRequest, output: str) -> float:
    """`contextUsagePercentage` by default: the prompt's estimated tokens and the answer's
    (characters / 4), of the window the account really has for the model (GPT-5.6: 1M though it
    is listed at 272 000; `catalog.Model.window`). Measured after generation, so the answer
    counts (yupanzi/kiro2claude docs/PITFALLS.md, 2026-10-07; one source)."""
    tokens = request.estimated_tokens + math.ceil(len(output) / 4)
    return round(100 * tokens / request.model.usage_window, 4)


EFFORT_CREDITS = {"low": 0.5, "medium": 0.75, "high": 1.0, "xhigh": 1.25, "max": 1.5}
"""How the root effort scales the fake's credits, so a test can tell which effort Kiro honoured:
sunerpy saw credits follow the root effort (docs/audits/opus-5-5-catalog-probe-2026-09-26.zh.md,
2026-09-26, Opus 5.5 low to max), kiro2claude saw them not move with `userInputMessage.reasoning`
(docs/PITFALLS.md, to 2026-10-07). The factors are the fake's own; none given is 1."""


def _default_credits(request: ChatRequest, output: str) -> float:
    factor = EFFORT_CREDITS.get(request.effort or "", 1.0)
    return round(request.model.rate_multiplier * factor * (0.01 + len(output) / 100_000), 6)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _compact(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))

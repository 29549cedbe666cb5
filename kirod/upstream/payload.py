"""Build the GenerateAssistantResponse body (IDE persona) from a CanonicalRequest.

Kiro rejects many conversations that Anthropic and OpenAI accept, mostly with an unexplained
`400 Improperly formed request.`. Every construction rule peers learned (docs/KIRO-PROTOCOL.md §2.3)
is one small function, named in its docstring by rule number: the conversation's shape (rules 1-6,
9, 14, 17, 18) is `kirod.upstream.conversation`'s, reasoning (docs/KIRO-PROTOCOL.md §2.4)
`kirod.upstream.reasoning`'s, the tools' names, specs and schemas `kirod.upstream.tools`'s; the
request-level checks and the serialisation are here. Nothing the client said is dropped silently:
what Kiro cannot carry structurally becomes text or a clear 400 (forced tool choice, unsupported
parameters under the "error" policy, oversized prompts, images of an unsupported type).

Rule 12 (no `cachePoint` in `tools[]`) needs no code: client `cache_control` never reaches the
canonical request. Message-level cache points are an experiment behind `cache_points`
(`_cache_points`, docs/UPSTREAM.md §1.5). Rule 15 is `_check_tool_choice`; rule 16 is `_check_size`.

Prompt caching upstream keys on a stable prefix (docs/UPSTREAM.md §1.2), so the body is laid out for
it: the system prompt is the first history entry, `history` is serialised before
`currentMessage`, and nothing depends on the clock or randomness. Two turns of one conversation
therefore encode to bodies whose bytes agree up to the end of the earlier turn's history.

Rule 16 is checked twice: first on a lower bound of the payload's size, before any turn is shaped
or any tool schema cleaned — every text the client sent (messages, tool results, system), each
role change's history entry, and the tool schemas as sent (cleaning drops only nulls, `$schema`,
malformed keywords and what the branches of a top-level union repeat, so a schema far above the
limit does not come under it) — then on the encoded body, less its images' base64
(`_image_bytes`). A request far too large for Kiro is
refused at the cost of adding up lengths.

The builder is pure: no I/O, no clock, no randomness; the caller supplies the conversation id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from kirod.canonical import wirejson
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import (
    CanonicalRequest,
    ImageBlock,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolChoiceMode,
    ToolResultBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.upstream.conversation import PLACEHOLDER, Turn, shape_turns, split_current, system_entry
from kirod.upstream.documents import kiro_names
from kirod.upstream.reasoning import (
    inject_thinking_tags,
    root_fields,
    thinking_mode,
    thinking_tags,
)
from kirod.upstream.thinking_tags import ThinkingMode
from kirod.upstream.tools import ToolNameMap, shorten_tool_names, tool_names, tool_specs

ParameterPolicy: TypeAlias = Literal["drop", "error"]

ORIGIN = "AI_EDITOR"
CHAT_TRIGGER = "MANUAL"
AGENT_TASK_TYPE = "vibe"
DEFAULT_MAX_PAYLOAD_BYTES = 600_000  # the kiro_max_body_bytes option's default (rule 16)
_ENTRY_BYTES = 40  # the smallest history entry, {"assistantResponseMessage":{"content":""}},
_IMAGE_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "gif": "gif", "webp": "webp"}


@dataclass(frozen=True, slots=True)
class BuiltPayload:
    """A GenerateAssistantResponse body and what the response path must know about it.

    `thinking_mode` tells the translator whether to split `<thinking>` tags out of the text
    ("tags"), expect reasoning events ("native"), or neither. `effort_clamped` is the asked
    effort and the one sent instead (`"xhigh>high"`) when the model does not list the former;
    `max_tokens_clamped` likewise for a `max_tokens` moved into the schema's range.
    `request_fields` says the body carries root `additionalModelRequestFields`.
    """

    body: dict[str, Any]
    tool_names: ToolNameMap
    dropped_parameters: tuple[str, ...]
    thinking_mode: ThinkingMode
    encoded: bytes = b""
    """`body` as the bytes to send (made once, for the size check); `KiroClient.chat` takes it."""
    effort_clamped: str | None = None
    documents: tuple[str, ...] = ()
    """The formats of the documents the body carries, in order."""
    max_tokens_clamped: str | None = None

    @property
    def request_fields(self) -> bool:
        return "additionalModelRequestFields" in self.body


def build_payload(
    request: CanonicalRequest,
    model: ModelInfo,
    *,
    conversation_id: str,
    profile_arn: str | None,
    parameter_policy: ParameterPolicy = "drop",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    cache_points: bool = False,
    request_fields: bool = True,
    replay_reasoning: bool = True,
) -> BuiltPayload:
    """The Kiro request body for `request` on `model`; raises ApiError for what Kiro cannot do.

    Rule 20: `conversation_id` is the caller's (any UUID works; one per conversation is fine).
    `request_fields` False sends no root `additionalModelRequestFields` (the account refused
    them: docs/KIRO-PROTOCOL.md §2.6); `replay_reasoning` False leaves every earlier reasoning
    block out of the history (Kiro refused a signature: docs/KIRO-PROTOCOL.md §2.6).
    """
    dropped = _check_parameters(request, parameter_policy)
    tools_enabled = _check_tool_choice(request)
    schemas = [wirejson.dumps(tool.input_schema) for tool in request.tools] if tools_enabled else []
    _check_size(_least_size(request) + sum(map(len, schemas)), max_payload_bytes, at_least=True)
    mode = thinking_mode(request, model, request_fields=request_fields)
    names = shorten_tool_names(tool_names(request) if tools_enabled else ())

    turns = shape_turns(request.messages, model, names, tools_enabled, mode)
    system = "\n\n".join(text for text in request.system if text)
    clamped: str | None = None
    if mode == "tags" and request.reasoning is not None:
        tags, clamped = thinking_tags(request.reasoning, model)
        system = inject_thinking_tags(tags, system, turns[0])
    history, current = split_current(turns)
    history = system_entry(system) + history

    used = (use.name for turn in turns for use in turn.uses)
    tools = tool_specs(request.tools, schemas, names, used) if tools_enabled else []
    current_entry = _user_entry(current, model.kiro_id, tools)
    root = root_fields(request, model, mode) if request_fields else None
    fields = root.fields if root is not None else {}
    if root is not None and root.effort_clamped is not None:
        clamped = root.effort_clamped

    state: dict[str, Any] = {
        "conversationId": conversation_id,
        "agentTaskType": AGENT_TASK_TYPE,
        "chatTriggerType": CHAT_TRIGGER,
    }
    entries = [
        _user_entry(turn, model.kiro_id)
        if turn.role is Role.USER
        else _assistant_entry(turn, replay_reasoning)
        for turn in history
    ]
    if cache_points:
        _cache_points(entries, model)
    if entries:
        state["history"] = entries  # before currentMessage: the stable part comes first
    state["currentMessage"] = current_entry
    body: dict[str, Any] = {"conversationState": state}
    if profile_arn is not None:
        body["profileArn"] = profile_arn
    if fields:
        body["additionalModelRequestFields"] = fields
    encoded = wirejson.dumps(body)
    _check_size(len(encoded) - _image_bytes(turns), max_payload_bytes)
    return BuiltPayload(
        body=body,
        tool_names=ToolNameMap({short: orig for orig, short in names.items() if short != orig}),
        dropped_parameters=dropped,
        thinking_mode=mode,
        encoded=encoded,
        effort_clamped=clamped,
        documents=tuple(document.format for turn in turns for document in turn.documents),
        max_tokens_clamped=root.max_tokens_clamped if root is not None else None,
    )


# -- request-level checks --------------------------------------------------------------------------


def _check_parameters(request: CanonicalRequest, policy: ParameterPolicy) -> tuple[str, ...]:
    """Sampling controls and stop sequences have no field in Kiro's request: record or refuse."""
    present = tuple(
        name
        for name, value in (
            ("temperature", request.sampling.temperature),
            ("top_p", request.sampling.top_p),
            ("top_k", request.sampling.top_k),
            ("stop_sequences", request.stop_sequences or None),
        )
        if value is not None
    )
    if present and policy == "error":
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"'{present[0]}' is not supported by Kiro models; remove it from the request",
            code="unsupported_parameter",
            param=present[0],
        )
    return present


def _check_tool_choice(request: CanonicalRequest) -> bool:
    """Rule 15: Kiro cannot force a tool. Returns whether tools may be offered at all."""
    mode = request.tool_choice.mode
    if mode in (ToolChoiceMode.ANY, ToolChoiceMode.TOOL):
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            "forcing a tool call is not supported by Kiro; use tool_choice auto or none",
            code="unsupported_capability",
            param="tool_choice",
        )
    return mode is not ToolChoiceMode.NONE


def _check_size(size: int, limit: int, *, at_least: bool = False) -> None:
    """Rule 16: bodies above ~615 KB failed upstream with a cryptic 400 in February 2026, so kirod
    refuses them clearly, saying the limit is its own and which option moves it: whether Kiro's
    limit has moved since is unknown (docs/KIRO-PROTOCOL.md §2.3)."""
    if size > limit:
        amount = f"at least {size}" if at_least else f"{size}"
        raise ApiError(
            ErrorKind.REQUEST_TOO_LARGE,
            f"the request for Kiro would be {amount} bytes, over kirod's limit of {limit} "
            "(the kiro_max_body_bytes option, set from the largest body Kiro took in February "
            "2026; images are not counted); compact the conversation or remove large "
            "attachments and retry, or raise kiro_max_body_bytes",
            code="request_too_large",
        )


def _image_bytes(turns: Sequence[Turn]) -> int:
    """Rule 16 leaves images out: Kiro bounds each image by itself (docs/UPSTREAM.md §6), and images
    of 6.7 and 13 MB of base64 reached the model's own check through it (kirodotdev/KiroCrew#1941,
    kirodotdev/Kiro#11497), so the ~600 KB limit is not on them."""
    return sum(len(image.data_base64) for turn in turns for image in turn.images)


def _least_size(request: CanonicalRequest) -> int:
    """Bytes every payload for `request` carries at least, counted without shaping it.

    Every non-blank text of the messages, their tool results and the system prompt is sent
    verbatim (a character is at least one byte, and JSON escaping only adds), and each run of
    one role becomes a history entry of at least `_ENTRY_BYTES`. Blank texts may be dropped
    (rule 5), thinking, images and documents may be left out (docs/KIRO-PROTOCOL.md §2.4, rule 17):
    none of them count.
    """
    size = sum(len(text) for text in request.system if not text.isspace())
    role: Role | None = None
    for message in request.messages:
        if message.role is not role:
            role = message.role
            size += _ENTRY_BYTES
        for block in message.content:
            if isinstance(block, TextBlock):
                if not block.text.isspace():
                    size += len(block.text)
            elif isinstance(block, ToolResultBlock):
                size += sum(
                    len(part.text)
                    for part in block.content
                    if isinstance(part, TextBlock) and not part.text.isspace()
                )
    return size


# -- serialisation (rules 17, 19, 20), cache points ------------------------------------------------


def _user_entry(
    turn: Turn, model_id: str, tools: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Rule 19: modelId and origin on every user entry; rule 17: images in `images` only;
    rule 21: documents in `documents`, named as Kiro accepts.

    Tools are declared on the current message only; an empty context is left out.
    """
    message: dict[str, Any] = {"content": turn.content, "modelId": model_id, "origin": ORIGIN}
    if turn.images:
        message["images"] = [
            {"format": _image_format(image), "source": {"bytes": image.data_base64}}
            for image in turn.images
        ]
    if turn.documents:
        message["documents"] = [
            {"name": name, "format": doc.format, "source": {"bytes": doc.data_base64}}
            for name, doc in zip(kiro_names(turn.documents), turn.documents, strict=True)
        ]
    context: dict[str, Any] = {}
    if tools:
        context["tools"] = list(tools)
    if turn.results:
        context["toolResults"] = [
            {
                "toolUseId": result.tool_use_id,
                "content": [{"text": result.text or PLACEHOLDER}],
                "status": "error" if result.is_error else "success",
            }
            for result in turn.results
        ]
    if context:
        message["userInputMessageContext"] = context
    return {"userInputMessage": message}


def _assistant_entry(turn: Turn, replay_reasoning: bool = True) -> dict[str, Any]:
    """docs/KIRO-PROTOCOL.md §2.6: signed reasoning replays as nested
    `reasoningContent.reasoningText`, unless `replay_reasoning` is off.

    Redacted reasoning (GPT-5.6's opaque blob) replays as `reasoningContent.redactedContent`, the
    other member of the Bedrock-style reasoning union, as `reasoningContentEvent` delivers it.
    """
    message: dict[str, Any] = {"content": turn.content}
    if turn.uses:
        message["toolUses"] = [
            {"toolUseId": use.id, "name": use.name, "input": use.input} for use in turn.uses
        ]
    if not replay_reasoning:
        return {"assistantResponseMessage": message}
    if isinstance(turn.reasoning, ThinkingBlock):
        text, signature = turn.reasoning.thinking, turn.reasoning.signature
        message["reasoningContent"] = {"reasoningText": {"text": text, "signature": signature}}
    elif isinstance(turn.reasoning, RedactedThinkingBlock):
        message["reasoningContent"] = {"redactedContent": turn.reasoning.data}
    return {"assistantResponseMessage": message}


def _image_format(image: ImageBlock) -> str:
    """Rule 17: `format` is the media subtype, one of png, jpeg, gif, webp."""
    kind, _, subtype = image.media_type.lower().partition("/")
    image_format = _IMAGE_FORMATS.get(subtype) if kind == "image" else None
    if image_format is None:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"image type '{image.media_type}' is not supported; use PNG, JPEG, GIF or WebP",
            code="unsupported_image_format",
            param="messages",
        )
    return image_format


CACHE_POINT = {"type": "default"}
_CACHE_POINTS_AT_MOST = 2


def _cache_points(entries: Sequence[dict[str, Any]], model: ModelInfo) -> None:
    """docs/UPSTREAM.md §1.5: message-level `cachePoint`s, only where the catalog allows them.

    Placed as the one published attempt did (opencode PR #18768, modelled on kiro-cli): on the
    first history entry, which carries the system prompt, and on the last one, the end of the
    reused prefix; never more than the model's `maximumCacheCheckpointsPerRequest`.
    Whether Kiro honours them beyond conversationId reuse is unmeasured, hence opt-in.
    """
    budget = min(model.cache_checkpoints, _CACHE_POINTS_AT_MOST)
    if budget == 0 or not entries:
        return
    # Either entry may be of either role (rules 3 and 4), and they are one when history has one.
    places = [next(iter(entries[0].values())), next(iter(entries[-1].values()))]
    for message in places[: budget if len(entries) > 1 else 1]:
        message["cachePoint"] = dict(CACHE_POINT)

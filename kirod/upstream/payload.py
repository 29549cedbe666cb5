"""Build the GenerateAssistantResponse body (IDE persona) from a CanonicalRequest.

Kiro rejects many conversations that Anthropic and OpenAI accept, mostly with an unexplained
`400 Improperly formed request.`. Every construction rule peers learned (kiro-protocol §2.3) is one
small function here, named in its docstring by rule number, and the builder applies them in an
order where each rule's output satisfies the ones before it. Nothing the client said is dropped
silently: what Kiro cannot carry structurally becomes text (orphan tool results, tool traffic under
`tool_choice: none`, old images, history documents on a model without DOCUMENT input) or a clear
400 (forced tool choice, unsupported parameters under the "error" policy, oversized prompts, a
current message's images or documents for a model that cannot take them).

Rule 12 (no `cachePoint` in `tools[]`) needs no code: client `cache_control` never reaches the
canonical request. Message-level cache points are an experiment behind `cache_points`
(`_cache_points`, capabilities §1.8). Rule 15 is `_check_tool_choice`; rule 16 is `_check_size`.

Prompt caching upstream keys on a stable prefix (capabilities §1.3), so the body is laid out for
it: the system prompt is the first history pair, `history` is serialised before
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
The tools' names, specs and schemas are `kirod.upstream.tools`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from kirod.canonical import wirejson
from kirod.canonical.models import ModelInfo
from kirod.canonical.request import (
    CanonicalRequest,
    DocumentBlock,
    Effort,
    ImageBlock,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolChoiceMode,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.upstream.thinking_tags import ThinkingMode
from kirod.upstream.tools import (
    MAX_NESTING,
    ToolNameMap,
    shorten_tool_names,
    too_deep,
    tool_names,
    tool_specs,
)

ParameterPolicy: TypeAlias = Literal["drop", "error"]

ORIGIN = "AI_EDITOR"
CHAT_TRIGGER = "MANUAL"
AGENT_TASK_TYPE = "vibe"
DEFAULT_MAX_PAYLOAD_BYTES = 600_000
RAW_IMAGE_HISTORY = 5
TAG_BUDGET_MIN = 1_024
TAG_BUDGET_MAX = 24_576
_ENTRY_BYTES = 40  # the smallest history entry, {"assistantResponseMessage":{"content":""}},

PLACEHOLDER = "(empty)"
"""Stands in for empty content (rule 5), as jwadow does. kiro.rs's lone space is not used: peers
report whitespace-only content as risky, and a visible marker tells the model nothing was said."""
CONTINUE = "Continue"
SYSTEM_ACK = "I will follow these instructions."
UNANSWERED = "tool call was not answered"
TOOL_RESULT_IMAGE = "(image attached to this message)"
TOOL_RESULT_DOCUMENT = "(document attached to this message)"

_IMAGE_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "gif": "gif", "webp": "webp"}
_EFFORT_BUDGETS: tuple[tuple[int, Effort], ...] = (
    (4_096, "low"),
    (16_384, "medium"),
    (32_768, "high"),
)
_DEFAULT_EFFORT: Effort = "high"


@dataclass(frozen=True, slots=True)
class BuiltPayload:
    """A GenerateAssistantResponse body and what the response path must know about it.

    `thinking_mode` tells the translator whether to split `<thinking>` tags out of the text
    ("tags"), expect reasoning events ("native"), or neither. `effort_clamped` is the asked
    effort and the one sent instead (`"xhigh>high"`) when the model does not list the former.
    """

    body: dict[str, Any]
    tool_names: ToolNameMap
    dropped_parameters: tuple[str, ...]
    thinking_mode: ThinkingMode
    encoded: bytes = b""
    """`body` as the bytes to send (made once, for the size check); `KiroClient.chat` takes it."""
    effort_clamped: str | None = None


@dataclass(slots=True)
class _Use:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(slots=True)
class _Result:
    tool_use_id: str
    text: str
    is_error: bool


class _Turn:
    """A message being shaped for Kiro; tool names are already the ones Kiro will see.

    A plain class: one is made per message of every request, and a dataclass's five list
    factories cost more than the rest of its construction."""

    __slots__ = ("documents", "images", "reasoning", "results", "role", "texts", "uses")

    def __init__(self, role: Role, texts: list[str] | None = None) -> None:
        self.role = role
        self.texts: list[str] = [] if texts is None else texts
        self.images: list[ImageBlock] = []
        self.documents: list[DocumentBlock] = []
        self.uses: list[_Use] = []
        self.results: list[_Result] = []
        self.reasoning: ThinkingBlock | RedactedThinkingBlock | None = None

    @property
    def content(self) -> str:
        return "\n\n".join(text for text in self.texts if text)

    @property
    def blank(self) -> bool:
        """Whether `content` is empty or whitespace, told without joining the texts."""
        return all(text.isspace() for text in self.texts if text)


def build_payload(
    request: CanonicalRequest,
    model: ModelInfo,
    *,
    conversation_id: str,
    profile_arn: str | None,
    parameter_policy: ParameterPolicy = "drop",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    cache_points: bool = False,
) -> BuiltPayload:
    """The Kiro request body for `request` on `model`; raises ApiError for what Kiro cannot do.

    Rule 20: `conversation_id` is the caller's (any UUID works; one per conversation is fine).
    """
    dropped = _check_parameters(request, parameter_policy)
    tools_enabled = _check_tool_choice(request)
    schemas = [wirejson.dumps(tool.input_schema) for tool in request.tools] if tools_enabled else []
    _check_size(_least_size(request) + sum(map(len, schemas)), max_payload_bytes, at_least=True)
    mode = _thinking_mode(request, model)
    names = shorten_tool_names(tool_names(request) if tools_enabled else ())

    turns = [_to_turn(message, names, tools_enabled, mode) for message in request.messages]
    turns = _merge_adjacent(turns)
    _continue_after_prefill(turns)
    _dedupe_tool_results(turns)
    _pair_tools(turns)
    turns = _start_with_user(turns)
    _limit_images(turns, model)
    _limit_documents(turns, model)
    _fill_empty(turns)
    system = "\n\n".join(text for text in request.system if text)
    clamped: str | None = None
    if mode == "tags" and request.reasoning is not None:
        tags, clamped = _thinking_tags(request.reasoning, model)
        system = _inject_thinking_tags(tags, system, turns[0])
    history, current = _split_current(turns)
    history = _system_pair(system) + history

    used = (use.name for turn in turns for use in turn.uses)
    tools = tool_specs(request.tools, schemas, names, used) if tools_enabled else []
    current_entry = _user_entry(current, model.kiro_id, tools)
    fields: dict[str, Any] = {}
    if mode == "native" and request.reasoning is not None:
        effort, clamped = _clamped_effort(_effort(request.reasoning), model)
        fields = _native_effort(effort, model, current_entry["userInputMessage"])

    state: dict[str, Any] = {
        "conversationId": conversation_id,
        "agentTaskType": AGENT_TASK_TYPE,
        "chatTriggerType": CHAT_TRIGGER,
    }
    entries = [
        _user_entry(turn, model.kiro_id) if turn.role is Role.USER else _assistant_entry(turn)
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
    """Rule 16: bodies above ~600 KB fail upstream with a cryptic 400, so refuse them clearly."""
    if size > limit:
        amount = f"at least {size}" if at_least else f"{size}"
        raise ApiError(
            ErrorKind.REQUEST_TOO_LARGE,
            f"the prompt is too large for Kiro ({amount} bytes, limit {limit}); compact the "
            "conversation or remove large attachments and retry",
            code="request_too_large",
        )


def _image_bytes(turns: Sequence[_Turn]) -> int:
    """Rule 16 leaves images out: Kiro bounds each image by itself (capabilities §9), and images
    of 6.7 and 13 MB of base64 reached the model's own check through it (kirodotdev/KiroCrew#1941,
    kirodotdev/Kiro#11497), so the ~600 KB limit is not on them."""
    return sum(len(image.data_base64) for turn in turns for image in turn.images)


def _least_size(request: CanonicalRequest) -> int:
    """Bytes every payload for `request` carries at least, counted without shaping it.

    Every non-blank text of the messages, their tool results and the system prompt is sent
    verbatim (a character is at least one byte, and JSON escaping only adds), and each run of
    one role becomes a history entry of at least `_ENTRY_BYTES`. Blank texts may be dropped
    (rule 5), thinking, images and documents may be left out (§2.4, rule 17): none of them
    count.
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


# -- messages → turns ------------------------------------------------------------------------------


def _to_turn(
    message: Message, names: Mapping[str, str], tools_enabled: bool, mode: ThinkingMode
) -> _Turn:
    """One client message as a turn; reasoning is kept only where §2.4b can replay it."""
    turn = _Turn(message.role)
    for block in message.content:
        if isinstance(block, TextBlock):
            turn.texts.append(block.text)
        elif isinstance(block, ImageBlock):
            if message.role is Role.USER:
                turn.images.append(block)
            else:
                turn.texts.append(_image_placeholder(block))
        elif isinstance(block, DocumentBlock):
            _attach_document(turn, block)
        elif isinstance(block, ToolUseBlock):
            use = _Use(block.id, names.get(block.name, block.name), _clean_input(block.input))
            if tools_enabled:
                turn.uses.append(use)
            else:
                turn.texts.append(_use_as_text(use))
        elif isinstance(block, ToolResultBlock):
            result = _result_from_block(block, turn)
            if tools_enabled:
                turn.results.append(result)
            else:
                turn.texts.append(_result_as_text(result))
        elif (
            isinstance(block, ThinkingBlock | RedactedThinkingBlock)
            and mode == "native"
            and message.role is Role.ASSISTANT
            and turn.reasoning is None
            and (isinstance(block, RedactedThinkingBlock) or block.signature)
        ):
            turn.reasoning = block
        # Other thinking is neither replayed nor re-sent as prompt text (§2.4).
    return turn


def _result_from_block(block: ToolResultBlock, turn: _Turn) -> _Result:
    """Rule 17: images inside a tool result move to the user turn's `images`; documents, like
    them, to its `documents` (Kiro's tool results hold only text and JSON)."""
    texts: list[str] = []
    for part in block.content:
        if isinstance(part, TextBlock):
            texts.append(part.text)
        elif isinstance(part, ImageBlock):
            turn.images.append(part)
            texts.append(TOOL_RESULT_IMAGE)
        else:
            _attach_document(turn, part)
            texts.append(TOOL_RESULT_DOCUMENT)
    return _Result(block.tool_use_id, "\n\n".join(texts), block.is_error)


def _attach_document(turn: _Turn, document: DocumentBlock) -> None:
    """A document goes in its user entry's `documents`; Kiro has no field for its context."""
    if document.context:
        turn.texts.append(f"[context of document '{document.name}': {document.context}]")
    if turn.role is Role.USER:
        turn.documents.append(document)
    else:
        turn.texts.append(_document_placeholder(document))


def _use_as_text(use: _Use) -> str:
    arguments = json.dumps(use.input, ensure_ascii=False, separators=(",", ":"))
    return f"[Tool call {use.id}: {use.name} {arguments}]"


def _result_as_text(result: _Result) -> str:
    status = " (error)" if result.is_error else ""
    return f"[Tool result {result.tool_use_id}{status}]\n{result.text}"


def _image_placeholder(image: ImageBlock) -> str:
    return f"[image ({image.media_type}) omitted]"


def _document_placeholder(document: DocumentBlock) -> str:
    return f"[document '{document.name}' ({document.format}) omitted]"


def _clean_input(value: Mapping[str, Any]) -> dict[str, Any]:
    """Rule 14: Kiro rejects tool inputs holding an empty-string key, at any depth."""

    def clean(node: Any, depth: int) -> Any:
        if depth > MAX_NESTING:
            raise too_deep("input")
        kind = node.__class__
        if kind is str or kind is int:  # most leaves, spared the ABC's slower check below
            return node
        if kind is dict or isinstance(node, Mapping):
            return {key: clean(item, depth + 1) for key, item in node.items() if key != ""}
        if isinstance(node, list):
            return [clean(item, depth + 1) for item in node]
        return node

    cleaned: dict[str, Any] = clean(value, 1)
    return cleaned


# -- conversation shape (rules 1-6, 9, 17) ---------------------------------------------------------


def _merge_adjacent(turns: Sequence[_Turn]) -> list[_Turn]:
    """Rule 2: consecutive same-role entries are a 400, so they become one turn.

    Merging (rather than inserting synthetic turns between them) also keeps every tool result in
    the turn right after the assistant turn that asked for it, as rule 6 requires. Only the first
    signed reasoning block survives: Kiro's entry has one `reasoningContent`.
    """
    merged: list[_Turn] = []
    for turn in turns:
        if merged and merged[-1].role is turn.role:
            last = merged[-1]
            last.texts.extend(turn.texts)
            last.images.extend(turn.images)
            last.documents.extend(turn.documents)
            last.uses.extend(turn.uses)
            last.results.extend(turn.results)
            last.reasoning = last.reasoning or turn.reasoning
        else:
            merged.append(turn)
    return merged


def _continue_after_prefill(turns: list[_Turn]) -> None:
    """Rule 1: the current message is a user turn; a trailing assistant turn is a prefill.

    The prefill stays in history and the model is asked to "Continue" from it.
    """
    if not turns:
        raise ApiError(ErrorKind.INVALID_REQUEST, "the request has no messages", param="messages")
    if turns[-1].role is Role.ASSISTANT:
        turns.append(_Turn(Role.USER, texts=[CONTINUE]))


def _dedupe_tool_results(turns: Sequence[_Turn]) -> None:
    """Rule 9: a repeated toolUseId in one turn's results is rejected; repeats become text."""
    for turn in turns:
        seen: set[str] = set()
        kept: list[_Result] = []
        for result in turn.results:
            if result.tool_use_id in seen:
                turn.texts.append(_result_as_text(result))
            else:
                seen.add(result.tool_use_id)
                kept.append(result)
        turn.results = kept


def _pair_tools(turns: Sequence[_Turn]) -> None:
    """Rule 6: results answer exactly the tool uses of the assistant turn just before them.

    A result with no matching use there becomes text in its turn (nothing is lost); a use left
    unanswered gets an error result, since Kiro rejects dangling uses. Results follow the order of
    the uses. Rule 1 guarantees every assistant turn is followed by a user turn.
    """
    for index, turn in enumerate(turns):
        if turn.role is not Role.USER:
            continue
        before = turns[index - 1] if index > 0 else None
        asked = list(dict.fromkeys(use.id for use in before.uses)) if before else []
        answers: dict[str, _Result] = {}
        for result in turn.results:
            if result.tool_use_id in asked:
                answers[result.tool_use_id] = result
            else:
                turn.texts.append(_result_as_text(result))
        turn.results = [
            answers.get(use_id) or _Result(use_id, UNANSWERED, True) for use_id in asked
        ]


def _start_with_user(turns: list[_Turn]) -> list[_Turn]:
    """Rule 3: history must open with a user entry; a leading assistant gets one before it."""
    if turns[0].role is Role.ASSISTANT:
        return [_Turn(Role.USER, texts=[PLACEHOLDER]), *turns]
    return turns


def _limit_images(turns: Sequence[_Turn], model: ModelInfo) -> None:
    """Rule 17: raw images only in the current message and the last 5 history entries.

    Older images (and, on a model without image input, every history image) become a text
    placeholder; an image in the current message for such a model is refused.
    """
    current = turns[-1]
    if current.images and not model.supports_images:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"model '{model.public_id}' does not accept images",
            code="unsupported_capability",
            param="messages",
        )
    recent = len(turns) - 1 - RAW_IMAGE_HISTORY
    for index, turn in enumerate(turns[:-1]):
        if index < recent or not model.supports_images:
            turn.texts.extend(_image_placeholder(image) for image in turn.images)
            turn.images = []


def _limit_documents(turns: Sequence[_Turn], model: ModelInfo) -> None:
    """Documents go only to a model whose catalog lists DOCUMENT input, as images go only to
    one with IMAGE: in the current message they are refused, in history they become a text
    placeholder (the conversation may have begun on another model). No history limit like
    rule 17's is known for documents, so a supporting model gets them all."""
    current = turns[-1]
    if current.documents and not model.supports_documents:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"documents (PDF and other files) are not supported by model '{model.public_id}'; "
            "send their text instead, or use a model that accepts documents",
            code="unsupported_capability",
            param="messages",
        )
    if not model.supports_documents:
        for turn in turns[:-1]:
            turn.texts.extend(_document_placeholder(document) for document in turn.documents)
            turn.documents = []


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


def _fill_empty(turns: Sequence[_Turn]) -> None:
    """Rule 5: no empty content, except a user turn carrying toolResults (kiro-cli sends "").

    Whitespace-only content counts as empty (so a tool-use-only assistant turn gets PLACEHOLDER,
    not kiro.rs's " "); every other empty turn gets PLACEHOLDER too.
    """
    for turn in turns:
        if not turn.blank:
            continue
        turn.texts = [] if turn.role is Role.USER and turn.results else [PLACEHOLDER]


def _split_current(turns: Sequence[_Turn]) -> tuple[list[_Turn], _Turn]:
    """Rule 4: history ends with an assistant entry before the current user turn.

    Rules 1 and 2 already make the last turn the whole trailing user run, so no "OK" filler is
    ever needed — and one would sit between tool results and the uses that asked for them.
    """
    history, current = list(turns[:-1]), turns[-1]
    assert current.role is Role.USER
    assert not history or history[-1].role is Role.ASSISTANT
    return history, current


def _system_pair(system: str) -> list[_Turn]:
    """Rule 18: Kiro has no system field; the system text is a first user/assistant pair."""
    if not system:
        return []
    return [_Turn(Role.USER, texts=[system]), _Turn(Role.ASSISTANT, texts=[SYSTEM_ACK])]


CACHE_POINT = {"type": "default"}
_CACHE_POINTS_AT_MOST = 2


def _cache_points(entries: Sequence[dict[str, Any]], model: ModelInfo) -> None:
    """Capabilities §1.8: message-level `cachePoint`s, only where the catalog allows them.

    Placed as the one published attempt did (opencode PR #18768, modelled on kiro-cli): on the
    first user entry, which carries the system prompt, and on the last assistant entry, the end
    of the reused prefix; never more than the model's `maximumCacheCheckpointsPerRequest`.
    Whether Kiro honours them beyond conversationId reuse is unmeasured, hence opt-in.
    """
    budget = min(model.cache_checkpoints, _CACHE_POINTS_AT_MOST)
    if budget == 0 or not entries:
        return
    # History opens with a user entry and ends with an assistant one (rules 3 and 4).
    places = [entries[0]["userInputMessage"], entries[-1]["assistantResponseMessage"]]
    for message in places[:budget]:
        message["cachePoint"] = dict(CACHE_POINT)


# -- thinking (§2.4) -------------------------------------------------------------------------------


def _thinking_mode(request: CanonicalRequest, model: ModelInfo) -> ThinkingMode:
    """§2.4: native reasoning where the model honours it, prompt tags elsewhere, never both.

    A model taking its effort in `additionalModelRequestFields.reasoning` (GPT) reasons natively
    by that field; prompt tags are a Claude device.
    """
    if request.reasoning is None:
        return "none"
    native = model.native_reasoning or model.reasoning_field_style == "reasoning"
    return "native" if native else "tags"


def _clamped_effort(asked: Effort, model: ModelInfo) -> tuple[Effort, str | None]:
    """The effort the model lists in `asked`'s place (the strongest not above it, else its
    lowest), and `"asked>sent"` when they differ, for the request's log line."""
    effort = model.clamp_effort(asked)
    return effort, None if effort == asked else f"{asked}>{effort}"


def _native_effort(effort: Effort, model: ModelInfo, current: dict[str, Any]) -> dict[str, Any]:
    """§2.4b: the effort where the model reads it; returns `additionalModelRequestFields`.

    A model whose field is `reasoning` (GPT-5.6) takes `additionalModelRequestFields.reasoning`
    (capabilities §9; sunerpy's probes saw credits rise with it), and nothing in
    `userInputMessage`, a combination no peer sends. Other models (Claude) get
    `userInputMessage.reasoning` and never a root `output_config`: the 4.5 generation rejects
    any such field and external-IdP accounts the root field itself (§2.4b), while the effort
    already reaches Claude here or through the prompt tags.
    """
    if model.reasoning_field_style == "reasoning":
        return {"reasoning": {"effort": effort}}
    current["reasoning"] = {"effort": effort}
    return {}


def _effort(reasoning: Reasoning) -> Effort:
    """§2.4b: the effort to send natively; budgets map onto effort bands."""
    if reasoning.effort is not None:
        return reasoning.effort
    if reasoning.budget_tokens is None:
        return _DEFAULT_EFFORT
    for ceiling, effort in _EFFORT_BUDGETS:
        if reasoning.budget_tokens <= ceiling:
            return effort
    return "max"


def _thinking_tags(reasoning: Reasoning, model: ModelInfo) -> tuple[str, str | None]:
    """§2.4a: a budget asks for budgeted thinking (clamped, never above what the model's catalog
    entry lets it write), an effort for adaptive thinking at the strongest level the model lists.
    Returns the tags and, as `_clamped_effort` does, the effort clamp if there was one.

    A model with no effort field (the 4.5 generation, Sonnet 4) predates adaptive thinking: its
    effort becomes the budget of that effort's band. The tags know no `xhigh`; it becomes `max`,
    which is also the level that reliably triggers thinking (kiro.rs issue #86).
    """
    budget = reasoning.budget_tokens
    if budget is None and model.reasoning_field_style == "none":
        budget = _effort_budget(reasoning.effort or _DEFAULT_EFFORT)
    if budget is not None:
        ceiling = min(TAG_BUDGET_MAX, model.max_output_tokens)
        budget = min(max(budget, TAG_BUDGET_MIN), ceiling)
        tags = (
            "<thinking_mode>enabled</thinking_mode>"
            f"<max_thinking_length>{budget}</max_thinking_length>"
        )
        return tags, None
    effort, clamped = _clamped_effort(reasoning.effort or _DEFAULT_EFFORT, model)
    effort = "max" if effort == "xhigh" else effort
    tags = f"<thinking_mode>adaptive</thinking_mode><thinking_effort>{effort}</thinking_effort>"
    return tags, clamped


def _effort_budget(effort: Effort) -> int:
    """The top of the budget band `_effort` maps onto `effort`; the tag maximum above `high`."""
    return next((ceiling for ceiling, band in _EFFORT_BUDGETS if band == effort), TAG_BUDGET_MAX)


def _inject_thinking_tags(tags: str, system: str, first: _Turn) -> str:
    """§2.4a: tags open the system text, or else the conversation's first user turn.

    Both are plain user turns by construction — rule 6 turns results without a preceding
    assistant into text and rule 3 puts a placeholder user before a leading assistant — so tags
    never land on a turn carrying toolResults (jwadow PR #158). Returns the new system text.
    """
    if system:
        return f"{tags}\n{system}"
    first.texts.insert(0, tags)
    return system


# -- serialisation (rules 17, 19, 20) --------------------------------------------------------------


def _user_entry(
    turn: _Turn, model_id: str, tools: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Rule 19: modelId and origin on every user entry; rule 17: images in `images` only.

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
            {"name": doc.name, "format": doc.format, "source": {"bytes": doc.data_base64}}
            for doc in turn.documents
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


def _assistant_entry(turn: _Turn) -> dict[str, Any]:
    """§2.4b: signed reasoning replays as nested `reasoningContent.reasoningText`.

    Redacted reasoning (GPT-5.6's opaque blob) replays as `reasoningContent.redactedContent`, the
    other member of the Bedrock-style reasoning union, as `reasoningContentEvent` delivers it.
    """
    message: dict[str, Any] = {"content": turn.content}
    if turn.uses:
        message["toolUses"] = [
            {"toolUseId": use.id, "name": use.name, "input": use.input} for use in turn.uses
        ]
    if isinstance(turn.reasoning, ThinkingBlock):
        text, signature = turn.reasoning.thinking, turn.reasoning.signature
        message["reasoningContent"] = {"reasoningText": {"text": text, "signature": signature}}
    elif isinstance(turn.reasoning, RedactedThinkingBlock):
        message["reasoningContent"] = {"redactedContent": turn.reasoning.data}
    return {"assistantResponseMessage": message}

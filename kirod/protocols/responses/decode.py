"""OpenAI Responses request body → `CanonicalRequest`, plus what the encoder and store need.

Conversation: `history` (the stored items of `previous_response_id`, loaded by the caller) then
`input`, both as Responses items. `instructions` and every `system`/`developer` message become
system text in order; user and assistant content, `function_call`/`function_call_output` pairs
and replayable `reasoning` items become canonical blocks, consecutive blocks of one role merged
into one message. Reasoning replays only when its `encrypted_content` was sealed by this
install's `ReasoningBox`; anything else is dropped (and counted for the log line).

Items by family, each in its own module: message content (`messages.py`), function and freeform
tool calls and their outputs (`calls.py`, `freeform.py`), the typed calls of client-run built-in
tools (`client_tools.py`), reasoning (`reasoning.py`), web search (`web_search.py`) and
compaction (`compaction.py`). `tools.py` reads the declared tools (top-level `tools` and Codex's
`additional_tools` items) and `tool_choice`.

Compaction: a `compaction_trigger` item turns the request into the summarisation turn of
`compaction.py` (tools and reasoning off), answered with one `compaction` item; a kirod-sealed
`compaction` item in the input stands for the summary it holds.

What cannot be honoured structurally is a 400, never approximated (docs/ARCHITECTURE.md §4.3):
forced `tool_choice`, `text.format` json_object/json_schema, image URLs and file ids, file URLs,
item references, `background`, `conversation` and prompt templates. `input_file` parts with inline
`file_data` become documents (refused later for a model whose catalog lacks DOCUMENT input).
Validation errors name the field path in both the message and `param`.

Bounds (`kirod.protocols.fields`), each a 400 naming it: at most 10 000 items (the stored
conversation of `previous_response_id` and `input` together), 20 000 content parts and tool
calls in all, 1 000 tools (top-level, namespaced and `additional_tools` together), a `model` of
at most 128 characters, `metadata` as OpenAI bounds it (16 pairs, keys of 64 characters, values
of 512), and `arguments` nested at most 128 levels; the body nests at most 128 levels
(`kirod.http.body`). An item's or a part's `type` must be a string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    Message,
    Role,
    Sampling,
    TextBlock,
    ToolChoice,
    ToolChoiceMode,
)
from kirod.protocols.fields import (
    MAX_MESSAGES,
    BlockBudget,
    at_most,
    boolean_field,
    invalid,
    is_object,
    number_field,
    positive_integer,
    quoted,
    string_field,
    string_metadata,
    unsupported,
)
from kirod.protocols.fields import model_name as model_field
from kirod.protocols.responses.calls import call_output, custom_tool_call, function_call
from kirod.protocols.responses.client_tools import CALL_TYPES, OUTPUT_TYPES
from kirod.protocols.responses.compaction import ITEM_TYPES as COMPACTION_ITEMS
from kirod.protocols.responses.compaction import SUMMARY_INSTRUCTION
from kirod.protocols.responses.compaction import TRIGGER as COMPACTION_TRIGGER
from kirod.protocols.responses.message_items import content_parts
from kirod.protocols.responses.reasoning import ReasoningBox, reasoning_options
from kirod.protocols.responses.response import ResponseEcho
from kirod.protocols.responses.tools import (
    DeclaredTools,
    FlatNames,
    ToolNames,
    additional_tools,
    tool_choice,
)
from kirod.protocols.responses.web_search import search_history

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
_SESSION_FIELDS: Final = ("session_id", "thread_id")
_UNSUPPORTED_FIELDS: Final[Mapping[str, str]] = {
    "background": "background responses are not supported; omit 'background'",
    "conversation": "conversations are not supported; use previous_response_id",
    "prompt": "prompt templates are not supported; send instructions and input instead",
}


@dataclass(frozen=True, slots=True)
class DecodedResponses:
    """A decoded `/v1/responses` body.

    `input_items` are this request's input items, normalized (a string input becomes a user
    message, string contents become parts) so that they decode again unchanged as `history`.
    """

    request: CanonicalRequest
    input_items: tuple[dict[str, Any], ...]
    echo: ResponseEcho
    dropped_tools: tuple[str, ...] = ()
    dropped_reasoning: int = 0
    generate: bool = True  # false: Codex's warm-up turn, answered without calling the model

    @property
    def store(self) -> bool:
        return self.echo.store

    @property
    def previous_response_id(self) -> str | None:
        return self.echo.previous_response_id

    @property
    def include_encrypted_reasoning(self) -> bool:
        return self.echo.include_encrypted

    @property
    def reasoning_summary(self) -> bool:
        return self.echo.summary

    @property
    def tool_names(self) -> ToolNames:
        return self.echo.tool_names


def decode_responses(
    body: object,
    headers: Mapping[str, str],
    *,
    request_id: str,
    history: Sequence[Mapping[str, Any]] = (),
    reasoning_box: ReasoningBox,
    compact: bool = False,
) -> DecodedResponses:
    """Decode a Responses request body; raises `ApiError` (400) naming the offending field.

    `compact` (the `/v1/responses/compact` endpoint), like a `compaction_trigger` input item,
    makes the request the summarisation turn of `compaction.py`.
    """
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    model = model_field(body.get("model"))  # first: a bad name is reported before any field
    for name, message in _UNSUPPORTED_FIELDS.items():
        if body.get(name) not in (None, False):
            raise unsupported(name, message)
    instructions = string_field(body, "instructions", "")
    choice, choice_echo = tool_choice(body.get("tool_choice"))
    reasoning, reasoning_echo, summary = reasoning_options(body.get("reasoning"))
    _check_text(body.get("text"))
    metadata = string_metadata(body.get("metadata"))
    prompt_cache_key = string_field(body, "prompt_cache_key", "")
    previous_response_id = string_field(body, "previous_response_id", "")

    items = _normalize_input(body.get("input"), len(history))
    tools = DeclaredTools(
        body.get("tools"),
        [
            *additional_tools(history, "previous_response_id"),
            *additional_tools(items, "input"),
        ],
    )
    conversation = _Conversation(reasoning_box, tools.flat_names)
    for index, item in enumerate(history):
        conversation.add(item, f"previous_response_id[{index}]")
    for index, item in enumerate(items):
        conversation.add(item, f"input[{index}]")
    if instructions:
        conversation.system.insert(0, instructions)
    compacting = compact or conversation.compacting
    if compacting:
        conversation.summarise()
    messages = conversation.messages()
    generate = boolean_field(body, "generate", default=True)
    if not messages and generate:
        raise invalid("input", "the conversation has no user or assistant message", "invalid_value")

    request = CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.OPENAI_RESPONSES,
        model=model,
        messages=messages,
        system=tuple(conversation.system),
        tools=() if compacting else tuple(tools.specs),
        tool_choice=ToolChoice(ToolChoiceMode.NONE) if compacting else choice,
        reasoning=None if compacting else reasoning,
        max_output_tokens=positive_integer(body, "max_output_tokens"),
        sampling=Sampling(
            temperature=number_field(body, "temperature", 0.0, 2.0),
            top_p=number_field(body, "top_p", 0.0, 1.0),
        ),
        affinity_key=_affinity(body, metadata, headers),
        stream=boolean_field(body, "stream", default=False),
        metadata=metadata,
        web_search=None if compacting else tools.search,
    )
    echo = ResponseEcho(
        model=model,
        instructions=instructions,
        tools=tuple(tools.echo),
        tool_choice=choice_echo,
        parallel_tool_calls=boolean_field(body, "parallel_tool_calls", default=True),
        reasoning=reasoning_echo,
        metadata=metadata,
        store=boolean_field(body, "store", default=True),
        previous_response_id=previous_response_id,
        max_output_tokens=request.max_output_tokens,
        temperature=request.sampling.temperature,
        top_p=request.sampling.top_p,
        truncation=string_field(body, "truncation", "") or "disabled",
        prompt_cache_key=prompt_cache_key,
        user=string_field(body, "user", ""),
        include_encrypted=ENCRYPTED_REASONING in _include(body.get("include")),
        summary=summary,
        tool_names=tools.names,
        custom_tools=frozenset(tools.custom),
        client_tools=frozenset(tools.client),
        compaction=compacting,
    )
    return DecodedResponses(
        request=request,
        input_items=tuple(items),
        echo=echo,
        dropped_tools=tools.dropped,
        dropped_reasoning=conversation.dropped_reasoning,
        generate=generate,
    )


# -- conversation --------------------------------------------------------------------------------


class _Conversation:
    """Folds Responses items into system text and role-merged canonical messages."""

    def __init__(self, box: ReasoningBox, flat_names: FlatNames) -> None:
        self._box = box
        self._flat_names = flat_names
        self.system: list[str] = []
        self._messages: list[tuple[Role, list[Block]]] = []
        self.dropped_reasoning = 0
        self.compacting = False
        self.budget = BlockBudget()

    def messages(self) -> tuple[Message, ...]:
        return tuple(Message(role, tuple(blocks)) for role, blocks in self._messages if blocks)

    def add(self, item: Mapping[str, Any], path: str) -> None:
        if not is_object(item):
            raise invalid(path, "each input item must be an object", "invalid_type")
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise invalid(f"{path}.type", "must be a string", "invalid_type")
        if kind != "message":
            self.budget.spend(1, path)
        if kind == "message":
            self._message(item, path)
        elif kind == "function_call":
            self._append(Role.ASSISTANT, [function_call(item, path, self._flat_names)])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._append(Role.USER, [call_output(item, path, self.budget)])
        elif kind == "custom_tool_call":
            self._append(Role.ASSISTANT, [custom_tool_call(item, path, self._flat_names)])
        elif kind == "web_search_call":
            self._append(Role.ASSISTANT, [search_history(item)])
        elif kind in CALL_TYPES:
            self._append(Role.ASSISTANT, [CALL_TYPES[kind].tool_use(item, path)])
        elif kind in OUTPUT_TYPES:
            self._append(Role.USER, [OUTPUT_TYPES[kind].tool_result(item, path)])
        elif kind == "additional_tools":
            pass  # declarations, read with the tools
        elif kind in COMPACTION_ITEMS:
            self._compaction(item, path)
        elif kind == COMPACTION_TRIGGER:
            self.compacting = True
        elif kind == "reasoning":
            self._reasoning(item, path)
        elif kind == "item_reference":
            raise unsupported(
                f"{path}.type",
                "item references are not supported; send the referenced item itself, or "
                "continue with previous_response_id",
            )
        else:
            raise invalid(f"{path}.type", f"input item type {quoted(kind)} is not supported")

    def _append(self, role: Role, blocks: list[Block]) -> None:
        if self._messages and self._messages[-1][0] is role:
            self._messages[-1][1].extend(blocks)
        else:
            self._messages.append((role, blocks))

    def _message(self, item: Mapping[str, Any], path: str) -> None:
        role = string_field(item, "role", path, required=True)
        parts = content_parts(
            item.get("content"), f"{path}.content", self.budget, attachments=role == "user"
        )
        if role in ("system", "developer"):
            self.system.extend(part.text for part in parts if isinstance(part, TextBlock))
        elif role == "user":
            self._append(Role.USER, list(parts))
        elif role == "assistant":
            self._append(Role.ASSISTANT, list(parts))
        else:
            raise invalid(
                f"{path}.role",
                f"role {quoted(role)} is not one of user, assistant, system, developer",
            )

    def _compaction(self, item: Mapping[str, Any], path: str) -> None:
        """A compaction item kirod sealed stands for the conversation it summarised."""
        token = string_field(item, "encrypted_content", path, required=True)
        assert token is not None
        summary = self._box.open_summary(token)
        if summary is None:
            raise invalid(
                f"{path}.encrypted_content",
                "this compaction item was not made by this kirod, or was altered; send the "
                "conversation itself or start a new session",
            )
        self._append(Role.USER, [TextBlock(summary)])

    def summarise(self) -> None:
        """End the conversation with the request to summarise it (compaction.py)."""
        self._append(Role.USER, [TextBlock(SUMMARY_INSTRUCTION)])

    def _reasoning(self, item: Mapping[str, Any], path: str) -> None:
        token = string_field(item, "encrypted_content", path)
        block = self._box.open_block(token) if token else None
        if block is None:
            self.dropped_reasoning += 1
        else:
            self._append(Role.ASSISTANT, [block])


def _normalize_input(value: object, stored: int) -> list[dict[str, Any]]:
    """The input as a list of items, string contents expanded into parts; with the `stored`
    items of the previous response, at most `MAX_MESSAGES`."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise invalid("input", "must be a string or a list of items", "invalid_type")
    at_most(len(value) + stored, MAX_MESSAGES, "input", "input and stored items")
    items = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise invalid(f"input[{index}]", "each input item must be an object", "invalid_type")
        # Items are only read from here on: one is copied only when it is changed.
        if "type" not in item:
            item = {"type": "message", **item}
        if item["type"] == "message" and isinstance(item.get("content"), str):
            kind = "output_text" if item.get("role") == "assistant" else "input_text"
            item = {**item, "content": [{"type": kind, "text": item["content"]}]}
        items.append(item)
    return items


# -- other fields ------------------------------------------------------------------------------


def _check_text(value: object) -> None:
    """Only plain text output: structured output cannot be guaranteed through Kiro."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise invalid("text", "must be an object", "invalid_type")
    fmt = value.get("format")
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind in ("json_object", "json_schema"):
        raise unsupported(
            "text.format",
            f"text.format type {kind!r} is not supported: Kiro cannot guarantee structured "
            "output; use type 'text'",
        )
    if kind != "text":
        raise invalid("text.format.type", "must be 'text', 'json_object' or 'json_schema'")


def _include(value: object) -> frozenset[str]:
    """Requested extras; only encrypted reasoning changes the output, others are accepted."""
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        raise invalid("include", "must be a list of strings", "invalid_type")
    return frozenset(value)


def _affinity(
    body: Mapping[str, Any], metadata: Mapping[str, str], headers: Mapping[str, str]
) -> str | None:
    """The conversation key: prompt_cache_key, metadata.kiro_session_id, client_metadata
    session_id/thread_id (Codex), then Codex's `session-id` header or opencode's
    `x-session-affinity`. Explicit inputs only."""
    if key := body.get("prompt_cache_key"):
        return str(key)
    if key := metadata.get("kiro_session_id"):
        return key
    client = body.get("client_metadata")
    if isinstance(client, Mapping):
        for name in _SESSION_FIELDS:
            if isinstance(value := client.get(name), str) and value:
                return value
    lowered = {name.lower(): value for name, value in headers.items()}
    return lowered.get("session-id") or lowered.get("x-session-affinity") or None

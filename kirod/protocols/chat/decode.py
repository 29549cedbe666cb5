"""OpenAI Chat Completions request body → `CanonicalRequest` (legacy API, opt-in).

Translated straight to canonical, never through the Responses codec (docs/ARCHITECTURE.md §3.3).
`system` and `developer` messages become system text in order; user and assistant content, assistant
`tool_calls` and `tool` messages become canonical blocks, consecutive blocks of one role merged
into one message. An assistant's `reasoning_content` is dropped: Chat carries no signature, so it
could never be replayed upstream.

What cannot be honoured is a 400, never approximated: forced `tool_choice`, `n` > 1,
`response_format` json_object/json_schema, log probabilities, audio, web search, image URLs, file
ids and the pre-`tools` `functions` API. Validation errors name the field path in the message and
`param`. `file` parts with inline `file_data` become documents.

Bounds (`kirod.protocols.fields`), each a 400 naming it: at most 10 000 `messages`, 20 000
content parts and tool calls in all, 1 000 `tools`, a `model` of at most 128 characters,
`metadata` as OpenAI bounds it (16 pairs, keys of 64 characters, values of 512), and tool-call
`arguments` nested at most 128 levels; the body nests at most 128 levels (`kirod.http.body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    DocumentBlock,
    Effort,
    ImageBlock,
    Message,
    Reasoning,
    Role,
    Sampling,
    TextBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.protocols.fields import (
    MAX_MESSAGES,
    BlockBudget,
    at_most,
    boolean_field,
    data_url_document,
    data_url_image,
    invalid,
    json_arguments,
    number_field,
    positive_integer,
    quoted,
    string_field,
    string_metadata,
    unsupported,
)
from kirod.protocols.fields import model_name as model_field
from kirod.protocols.function_tools import function_tools

_EFFORTS: Final[Mapping[str, Effort]] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_MAX_STOP_SEQUENCES: Final = 4
_UNSUPPORTED_FIELDS: Final[Mapping[str, str]] = {
    "functions": "the legacy 'functions' API is not supported; declare 'tools' instead",
    "function_call": "the legacy 'function_call' API is not supported; use 'tool_choice'",
    "audio": "audio output is not supported",
    "web_search_options": "web search is not supported: Kiro runs no hosted tools",
    "top_logprobs": "log probabilities are not supported",
}


@dataclass(frozen=True, slots=True)
class DecodedChat:
    """A decoded `/v1/chat/completions` body; `include_usage` asks for a final usage chunk."""

    request: CanonicalRequest
    include_usage: bool = False


def decode_chat(body: object, headers: Mapping[str, str], *, request_id: str) -> DecodedChat:
    """Decode a Chat Completions request body; raises `ApiError` (400) naming the field."""
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    model = model_field(body.get("model"))  # first: a bad name is reported before any field
    for name, message in _UNSUPPORTED_FIELDS.items():
        if body.get(name) is not None:
            raise unsupported(name, message)
    _check_options(body)
    system, messages = _messages(body.get("messages"))
    metadata = string_metadata(body.get("metadata"))
    max_tokens = positive_integer(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = positive_integer(body, "max_tokens")
    stream = boolean_field(body, "stream", default=False)
    request = CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.OPENAI_CHAT,
        model=model,
        messages=messages,
        system=system,
        tools=function_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        reasoning=_reasoning(body.get("reasoning_effort")),
        max_output_tokens=max_tokens,
        stop_sequences=_stop(body.get("stop")),
        sampling=Sampling(
            temperature=number_field(body, "temperature", 0.0, 2.0),
            top_p=number_field(body, "top_p", 0.0, 1.0),
        ),
        affinity_key=_affinity(body, metadata, headers),
        stream=stream,
        metadata=metadata,
    )
    return DecodedChat(request, include_usage=stream and _include_usage(body))


def _check_options(body: Mapping[str, Any]) -> None:
    n = positive_integer(body, "n")
    if n is not None and n != 1:
        raise unsupported("n", "only one choice per request is supported (n = 1)")
    if boolean_field(body, "logprobs", default=False):
        raise unsupported("logprobs", "log probabilities are not supported")
    modalities = body.get("modalities")
    if isinstance(modalities, list) and "audio" in modalities:
        raise unsupported("modalities", "audio output is not supported")
    fmt = body.get("response_format")
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind in ("json_object", "json_schema"):
        raise unsupported(
            "response_format",
            f"response_format type {kind!r} is not supported: Kiro cannot guarantee structured "
            "output; use type 'text'",
        )
    if kind != "text":
        raise invalid("response_format.type", "must be 'text', 'json_object' or 'json_schema'")


# -- messages ------------------------------------------------------------------------------------


def _messages(value: object) -> tuple[tuple[str, ...], tuple[Message, ...]]:
    if not isinstance(value, list) or not value:
        raise invalid("messages", "must be a non-empty list of messages", "invalid_type")
    at_most(len(value), MAX_MESSAGES, "messages", "messages")
    budget = BlockBudget()
    system: list[str] = []
    merged: list[tuple[Role, list[Block]]] = []

    def append(role: Role, blocks: list[Block]) -> None:
        if merged and merged[-1][0] is role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))

    for index, message in enumerate(value):
        path = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise invalid(path, "each message must be an object", "invalid_type")
        role = string_field(message, "role", path, required=True)
        content = message.get("content")
        if role in ("system", "developer"):
            parts = _text_parts(content, f"{path}.content", budget)
            system.extend(block.text for block in parts)
        elif role == "user":
            append(Role.USER, list(_user_parts(content, f"{path}.content", budget)))
        elif role == "assistant":
            blocks: list[Block] = [*_text_parts(content, f"{path}.content", budget, refusal=True)]
            blocks += _tool_calls(message.get("tool_calls"), f"{path}.tool_calls", budget)
            append(Role.ASSISTANT, blocks)
        elif role == "tool":
            call_id = string_field(message, "tool_call_id", path, required=True)
            assert call_id is not None
            result = _text_parts(content, f"{path}.content", budget)
            append(Role.USER, [ToolResultBlock(call_id, tuple(result))])
        elif role == "function":
            raise unsupported(f"{path}.role", "the legacy 'function' role is not supported")
        else:
            raise invalid(
                f"{path}.role",
                f"role {quoted(role)} is not one of system, developer, user, assistant, tool",
            )
    messages = tuple(Message(role, tuple(blocks)) for role, blocks in merged if blocks)
    if not messages:
        raise invalid("messages", "the conversation has no user or assistant message")
    return tuple(system), messages


def _parts(content: object, path: str, budget: BlockBudget) -> list[tuple[str, Mapping[str, Any]]]:
    """Content as (part path, part) pairs; a string is one text part, null none."""
    if content is None:
        return []
    if isinstance(content, str):
        budget.spend(1, path)
        return [(path, {"type": "text", "text": content})]
    if not isinstance(content, list):
        raise invalid(path, "content must be a string or a list of content parts", "invalid_type")
    budget.spend(len(content), path)
    parts = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise invalid(f"{path}[{index}]", "each content part must be an object", "invalid_type")
        parts.append((f"{path}[{index}]", part))
    return parts


def _text_parts(
    content: object, path: str, budget: BlockBudget, *, refusal: bool = False
) -> list[TextBlock]:
    blocks = []
    for part_path, part in _parts(content, path, budget):
        kind = part.get("type")
        if kind == "text" or (refusal and kind == "refusal"):
            field = "refusal" if kind == "refusal" else "text"
            text = string_field(part, field, part_path, required=True)
            if text:
                blocks.append(TextBlock(text))
        else:
            raise invalid(
                f"{part_path}.type", f"content part type {quoted(kind)} is not allowed here"
            )
    return blocks


def _user_parts(
    content: object, path: str, budget: BlockBudget
) -> list[TextBlock | ImageBlock | DocumentBlock]:
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for part_path, part in _parts(content, path, budget):
        kind = part.get("type")
        if kind == "text":
            text = string_field(part, "text", part_path, required=True)
            if text:
                blocks.append(TextBlock(text))
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url"), f"{part_path}.image_url"))
        elif kind == "file":
            blocks.append(_file(part.get("file"), f"{part_path}.file"))
        elif kind == "input_audio":
            raise unsupported(f"{part_path}.type", f"{kind} content is not supported")
        else:
            raise invalid(f"{part_path}.type", f"content part type {quoted(kind)} is not supported")
    return blocks


def _image(value: object, path: str) -> ImageBlock:
    url = value.get("url") if isinstance(value, Mapping) else value
    if not isinstance(url, str):
        raise invalid(f"{path}.url", "is required", "missing_required_parameter")
    return data_url_image(url, f"{path}.url")


def _file(value: object, path: str) -> DocumentBlock:
    """A `file` part: inline `file_data` (a base64 data URL) and `filename`; no file ids."""
    if not isinstance(value, Mapping):
        raise invalid(path, "must be an object", "invalid_type")
    if value.get("file_id") is not None:
        raise unsupported(
            f"{path}.file_id",
            "kirod cannot fetch files; send the file inline as file_data "
            "(data:application/pdf;base64,…) with a filename",
        )
    data = string_field(value, "file_data", path, required=True)
    assert data is not None
    return data_url_document(data, value.get("filename"), f"{path}.file_data", f"{path}.filename")


def _tool_calls(value: object, path: str, budget: BlockBudget) -> list[Block]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(path, "must be a list", "invalid_type")
    budget.spend(len(value), path)
    calls: list[Block] = []
    for index, call in enumerate(value):
        call_path = f"{path}[{index}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            raise invalid(call_path, "must be a function tool call object", "invalid_type")
        if call.get("type", "function") != "function":
            raise invalid(f"{call_path}.type", "only function tool calls are supported")
        call_id = string_field(call, "id", call_path, required=True)
        function = call["function"]
        name = string_field(function, "name", f"{call_path}.function", required=True)
        arguments = string_field(function, "arguments", f"{call_path}.function") or ""
        assert call_id is not None
        assert name is not None
        parsed = json_arguments(arguments, f"{call_path}.function.arguments")
        calls.append(ToolUseBlock(call_id, name, parsed))
    return calls


# -- tools and options ---------------------------------------------------------------------------


def _tool_choice(value: object) -> ToolChoice:
    """auto and none are honoured; Kiro cannot force a tool, so forcing is a 400."""
    if value is None or value == "auto":
        return ToolChoice(ToolChoiceMode.AUTO)
    if value == "none":
        return ToolChoice(ToolChoiceMode.NONE)
    if value == "required" or isinstance(value, Mapping):
        raise unsupported(
            "tool_choice",
            "forcing a tool call is not supported by Kiro; use tool_choice auto or none",
        )
    raise invalid("tool_choice", "must be 'auto', 'none', 'required' or a tool choice object")


def _reasoning(value: object) -> Reasoning | None:
    if value is None or value == "none":
        return None
    if not isinstance(value, str) or value not in _EFFORTS:
        raise invalid(
            "reasoning_effort", "must be one of none, minimal, low, medium, high, xhigh, max"
        )
    return Reasoning(effort=_EFFORTS[value])


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
        raise invalid("stop", "must be a string or a list of strings", "invalid_type")
    if len(stops) > _MAX_STOP_SEQUENCES:
        raise invalid("stop", f"at most {_MAX_STOP_SEQUENCES} stop sequences are allowed")
    return tuple(stops)


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, Mapping):
        raise invalid("stream_options", "must be an object", "invalid_type")
    value = options.get("include_usage")
    if value is not None and not isinstance(value, bool):
        raise invalid("stream_options.include_usage", "must be a boolean", "invalid_type")
    return bool(value)


def _affinity(
    body: Mapping[str, Any], metadata: Mapping[str, str], headers: Mapping[str, str]
) -> str | None:
    """The conversation key: prompt_cache_key, metadata.kiro_session_id, then a session header
    (opencode's `x-session-affinity` first)."""
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return key
    if key := metadata.get("kiro_session_id"):
        return key
    lowered = {name.lower(): value for name, value in headers.items()}
    for name in ("x-session-affinity", "session-id", "x-session-id"):
        if value := lowered.get(name):
            return value
    return None

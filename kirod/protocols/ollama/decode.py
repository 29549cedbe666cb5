"""Ollama `/api/chat` and `/api/show` request bodies → `CanonicalRequest` and a model name.

Ollama messages carry one string `content`, base64 `images` (no media type: it is read from the
image's first bytes), an assistant's `tool_calls` with `arguments` as a JSON object, and tool
results as `role: "tool"` messages naming the tool (`tool_name`) or the call (`tool_call_id`).
Clients may leave out a call's `id` (the official Python client keeps none), so a call without
one is named by its position, the same in every turn, and a tool result is matched to the
earliest call of the assistant turn before it that is still waiting, of its `tool_name` when it
gives one. `system` messages become system text in order; consecutive blocks of one role merge.
An assistant's `thinking` is dropped: it carries no signature to replay upstream.

`stream` defaults to true, as in Ollama. `think` is true, false or an effort (`low`, `medium`,
`high`, `max`). `options` gives `num_predict` (the output limit; 0 or below, Ollama's "no
limit", sets none), `temperature`, `top_p`, `top_k` and `stop`; the other options tune a local
runtime (`num_ctx`, `seed`, `num_gpu`, …) and are ignored, as Ollama ignores the ones a model
does not use. `keep_alive`, `truncate` and `shift` are accepted and ignored likewise. What
cannot be honoured is a 400: a `format` (structured output), `logprobs`.

Model names may carry Ollama's default tag (`claude-sonnet-4-5:latest`), which is dropped. The
bounds are the other codecs' (`kirod.protocols.fields`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    Effort,
    ImageBlock,
    Message,
    Reasoning,
    Role,
    Sampling,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.protocols.fields import (
    MAX_MESSAGES,
    OPENAI,
    BlockBudget,
    at_most,
    boolean_field,
    data_url_image,
    invalid,
    is_object,
    json_arguments,
    model_name,
    quoted,
    string_field,
    unsupported,
)
from kirod.protocols.function_tools import function_tools

DEFAULT_TAG: Final = ":latest"
_EFFORTS: Final[Mapping[str, Effort]] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "max": "max",
}
# Magic numbers of the image types Kiro takes; a base64 prefix of 16 characters is 12 bytes.
_SIGNATURES: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_HEAD_CHARS: Final = 16


def ollama_model(value: object, param: str = "model") -> str:
    """A model name as Ollama clients send it, without the default tag."""
    return model_name(value, param).removesuffix(DEFAULT_TAG)


def requested_model(body: Mapping[str, Any]) -> object:
    """The `model` of a body, unchecked, without the default tag."""
    value = body.get("model")
    return value.removesuffix(DEFAULT_TAG) if isinstance(value, str) else value


def decode_show(body: object) -> str:
    """The model an `/api/show` body names: `model`, or the older `name`."""
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    if body.get("model") is None and body.get("name") is not None:
        return ollama_model(body["name"], "name")
    return ollama_model(body.get("model"))


def decode_ollama_chat(body: object, *, request_id: str) -> CanonicalRequest:
    """Decode an `/api/chat` body; raises `ApiError` (400) naming the field."""
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    model = ollama_model(body.get("model"))  # first: a bad name is reported before any field
    fmt = body.get("format")
    if fmt is not None and fmt != "":
        raise unsupported(
            "format",
            "structured output is not supported: Kiro cannot guarantee a JSON answer; leave "
            "format out and describe the shape in the prompt",
        )
    if boolean_field(body, "logprobs", default=False):
        raise unsupported("logprobs", "log probabilities are not supported")
    system, messages = _messages(body.get("messages"))
    options = _options(body.get("options"))
    return CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.OLLAMA_CHAT,
        model=model,
        messages=messages,
        system=system,
        tools=function_tools(body.get("tools"), type_required=False),
        reasoning=_think(body.get("think")),
        max_output_tokens=options.max_tokens,
        stop_sequences=options.stop,
        sampling=options.sampling,
        stream=boolean_field(body, "stream", default=True),
    )


# -- messages ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    id: str
    name: str


class _Conversation:
    """The messages being built, and the tool calls of the last assistant turn not yet answered."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.merged: list[tuple[Role, list[Block]]] = []
        self.waiting: list[_Call] = []
        self.budget = BlockBudget()

    def append(self, role: Role, blocks: list[Block]) -> None:
        if self.merged and self.merged[-1][0] is role:
            self.merged[-1][1].extend(blocks)
        else:
            self.merged.append((role, blocks))

    def answered(self, message: Mapping[str, Any], path: str) -> str:
        """The id of the call a tool message answers."""
        call_id = string_field(message, "tool_call_id", path)
        if call_id:
            self.waiting = [call for call in self.waiting if call.id != call_id]
            return call_id
        name = string_field(message, "tool_name", path)
        call = next((c for c in self.waiting if name is None or c.name == name), None)
        if call is None:
            what = f"a call of {quoted(name)}" if name else "a call"
            raise invalid(
                path,
                f"a tool message must answer {what} made by the assistant message before it",
            )
        self.waiting.remove(call)
        return call.id


def _messages(value: object) -> tuple[tuple[str, ...], tuple[Message, ...]]:
    if not isinstance(value, list) or not value:
        raise invalid("messages", "must be a non-empty list of messages", "invalid_type")
    at_most(len(value), MAX_MESSAGES, "messages", "messages")
    conversation = _Conversation()
    for index, message in enumerate(value):
        path = f"messages[{index}]"
        if not is_object(message):
            raise invalid(path, "each message must be an object", "invalid_type")
        role = (string_field(message, "role", path, required=True) or "").lower()
        text = _content(message, path, conversation.budget)
        images = _images(message.get("images"), f"{path}.images", conversation.budget)
        if images and role not in ("user", "tool"):
            raise invalid(f"{path}.images", "images are accepted on user and tool messages only")
        if role == "system":
            conversation.system.extend(block.text for block in text)
        elif role == "user":
            conversation.append(Role.USER, [*images, *text])
        elif role == "assistant":
            calls = _tool_calls(message.get("tool_calls"), index, conversation.budget)
            conversation.waiting = [_Call(call.id, call.name) for call in calls]
            conversation.append(Role.ASSISTANT, [*text, *calls])
        elif role == "tool":
            call_id = conversation.answered(message, path)
            result = ToolResultBlock(call_id, (*text, *images))
            conversation.append(Role.USER, [result])
        else:
            raise invalid(
                f"{path}.role", f"role {quoted(role)} is not one of system, user, assistant, tool"
            )
    messages = tuple(Message(role, tuple(blocks)) for role, blocks in conversation.merged if blocks)
    if not messages:
        raise invalid("messages", "the conversation has no user or assistant message")
    return tuple(conversation.system), messages


def _content(message: Mapping[str, Any], path: str, budget: BlockBudget) -> list[TextBlock]:
    text = string_field(message, "content", path)
    if not text:
        return []
    budget.spend(1, f"{path}.content")
    return [TextBlock(text)]


def _images(value: object, path: str, budget: BlockBudget) -> list[ImageBlock]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(path, "must be a list of base64 images", "invalid_type")
    budget.spend(len(value), path)
    return [_image(item, f"{path}[{index}]") for index, item in enumerate(value)]


def _image(value: object, path: str) -> ImageBlock:
    data = OPENAI.nonempty_text(value, path)
    if data.startswith("data:"):
        return data_url_image(data, path)
    try:
        head = base64.b64decode(data[:_HEAD_CHARS], validate=True)
    except (binascii.Error, ValueError):
        raise invalid(path, "must be a base64-encoded image") from None
    return ImageBlock(_media_type(head, path), data)


def _media_type(head: bytes, path: str) -> str:
    for signature, media_type in _SIGNATURES:
        if head.startswith(signature):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    raise invalid(path, "is not a PNG, JPEG, GIF or WebP image")


def _tool_calls(value: object, message_index: int, budget: BlockBudget) -> list[ToolUseBlock]:
    path = f"messages[{message_index}].tool_calls"
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(path, "must be a list", "invalid_type")
    budget.spend(len(value), path)
    calls: list[ToolUseBlock] = []
    for index, call in enumerate(value):
        call_path = f"{path}[{index}]"
        function = call.get("function") if is_object(call) else None
        if not is_object(function):
            raise invalid(call_path, "must be an object with a 'function'", "invalid_type")
        name = string_field(function, "name", f"{call_path}.function", required=True)
        if not name:
            raise invalid(f"{call_path}.function.name", "must be a non-empty string")
        call_id = string_field(call, "id", call_path) or f"call_{message_index}_{index}"
        arguments = _arguments(function.get("arguments"), f"{call_path}.function.arguments")
        calls.append(ToolUseBlock(call_id, name, arguments))
    return calls


def _arguments(value: object, path: str) -> Mapping[str, Any]:
    """A JSON object, as Ollama sends it; a JSON-encoded one, as OpenAI habits send it."""
    if value is None:
        return {}
    if isinstance(value, str):
        return json_arguments(value, path)
    if not isinstance(value, dict):
        raise invalid(path, "must be a JSON object", "invalid_type")
    return value


# -- options -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Options:
    max_tokens: int | None
    stop: tuple[str, ...]
    sampling: Sampling


def _options(value: object) -> _Options:
    if value is None:
        return _Options(None, (), Sampling())
    if not is_object(value):
        raise invalid("options", "must be an object", "invalid_type")
    limit = value.get("num_predict")
    if limit is not None:
        limit = OPENAI.integer(limit, "options.num_predict")
    top_k = value.get("top_k")
    if top_k is not None and OPENAI.integer(top_k, "options.top_k") < 0:
        raise invalid("options.top_k", "must not be negative")
    return _Options(
        max_tokens=limit if limit is not None and limit > 0 else None,
        stop=_stop(value.get("stop")),
        sampling=Sampling(
            temperature=OPENAI.number(value.get("temperature"), "options.temperature", 0.0, 2.0),
            top_p=OPENAI.number(value.get("top_p"), "options.top_p", 0.0, 1.0),
            top_k=top_k,
        ),
    )


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
        raise invalid("options.stop", "must be a list of strings", "invalid_type")
    return tuple(stops)


def _think(value: object) -> Reasoning | None:
    if value is None or value is False:
        return None
    if value is True:
        return Reasoning()
    if isinstance(value, str) and value in _EFFORTS:
        return Reasoning(effort=_EFFORTS[value])
    raise invalid("think", "must be true, false or one of low, medium, high, max")

"""Gemini `generateContent` and `countTokens` bodies → `CanonicalRequest`.

The body is Google's `GenerateContentRequest` in its JSON (camelCase) form; the model comes from
the path (`models/{model}:generateContent`), never the body.

- `contents`: turns of role `user` or `model` (`function`, an older role for tool results, and a
  missing role are `user`); consecutive turns of one role merge, as Gemini CLI's router call
  sends two user turns in a row. Parts: `text`; `inlineData` images and documents (base64);
  `functionCall` (`id`, `name`, `args`) and `functionResponse` (`id`, `name`, `response`, and
  inline `parts`). A call without an `id` (the API sets none) is named by its place, the same in
  every turn, and a response is matched to the earliest waiting call of its name. `fileData`
  (a URL), code execution and video parts are refused: kirod fetches nothing and runs no code.
- Thinking: `thought: true` parts of a model turn are its reasoning; their `thoughtSignature`
  (on the last of them) is kirod's signature (`thoughts`), so reasoning kirod produced goes back
  upstream and any other is dropped, as is a turn's reasoning whose text the client left out
  (Gemini CLI keeps only the signature).
- `systemInstruction`: its text parts, in order.
- `tools`: `functionDeclarations` with `parameters` (Google's OpenAPI schema subset, whose
  upper-case types become JSON Schema's) or `parametersJsonSchema` (either spelling); one
  `googleSearch` (or the older `googleSearchRetrieval`) is kirod's web search. `urlContext`,
  code execution, retrieval and the rest are refused, naming what to do instead.
- `toolConfig.functionCallingConfig.mode`: AUTO and NONE; ANY and VALIDATED force calls, which
  Kiro cannot do, so they are refused like a forced tool choice on the other APIs.
- `generationConfig`: `maxOutputTokens`, `temperature`, `topP`, `topK`, `stopSequences` (the
  sampling ones under the parameter policy, as everywhere); `candidateCount` above 1, a JSON
  answer (`responseMimeType` other than text, or a response schema: structured output), log
  probabilities and non-text modalities are refused; seeds and penalties are accepted without
  effect. `thinkingConfig`: `includeThoughts: true` alone asks for thinking (all Gemini CLI
  sends); `thinkingBudget` (0 off, -1 the model's choice, N tokens) and `thinkingLevel` set how
  much. Thinking that runs without `includeThoughts` is not shown (`DecodedGemini.show_thoughts`).
- `safetySettings`, `labels` and `cachedContent` names: safety settings are Google's own filters
  and are accepted without effect; cached content is refused (kirod keeps no such store).

What Gemini CLI and google-genai send: docs/CLIENTS.md §4.4. The bounds are the other codecs'
(`kirod.protocols.fields`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kirod.canonical.request import (
    DOCUMENT_MEDIA_TYPES,
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
    ThinkingBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    WebSearch,
)
from kirod.protocols.fields import (
    MAX_MESSAGES,
    MAX_TOOLS,
    OPENAI,
    BlockBudget,
    at_most,
    invalid,
    is_object,
    quoted,
    string_field,
    unsupported,
)
from kirod.protocols.gemini.schema import json_schema
from kirod.protocols.gemini.thoughts import Signer, opened_signature

IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_LEVELS: Final[Mapping[str, Effort]] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
_TEXT_TYPES: Final = frozenset({"", "text/plain"})
_SEARCH_TOOLS: Final = ("googleSearch", "googleSearchRetrieval")
_REFUSED_TOOLS: Final[Mapping[str, str]] = {
    "urlContext": "URL context is not supported: kirod fetches no URLs; fetch the page in the "
    "client (Gemini CLI's web_fetch falls back to its own fetch)",
    "codeExecution": "code execution is not supported: Kiro runs no code",
    "retrieval": "retrieval is not supported",
    "fileSearch": "file search is not supported",
    "googleMaps": "Google Maps grounding is not supported",
    "computerUse": "computer use is not supported",
    "enterpriseWebSearch": "enterprise web search is not supported; use googleSearch",
    "mcpServers": "MCP servers in the request are not supported; declare functions instead",
}
_REFUSED_PARTS: Final[Mapping[str, str]] = {
    "fileData": "file URIs are not supported: kirod fetches no URLs; send the file as inlineData",
    "executableCode": "code execution parts are not supported: Kiro runs no code",
    "codeExecutionResult": "code execution parts are not supported: Kiro runs no code",
    "videoMetadata": "video is not supported",
}
_MAX_STOP_SEQUENCES: Final = 5  # Gemini's own limit
_UPPER: Final = re.compile(r"(?<!^)(?=[A-Z])")


def _key(obj: Mapping[str, Any], camel: str) -> str:
    """The spelling of a field `obj` uses: Google's JSON names fields in lowerCamelCase, and its
    parsers take the proto's snake_case too, which google-genai sends for some nested fields
    (`inlineData.mime_type`, `thinkingConfig.include_thoughts`: docs/CLIENTS.md §4.4)."""
    if camel in obj:
        return camel
    snake = _UPPER.sub("_", camel).lower()
    return snake if snake in obj else camel


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    return obj.get(_key(obj, camel))


def _text(obj: Mapping[str, Any], camel: str, parent: str, *, required: bool = False) -> str | None:
    return string_field(obj, _key(obj, camel), parent, required=required)


@dataclass(frozen=True, slots=True)
class DecodedGemini:
    """A decoded `generateContent` body; `show_thoughts` is its `includeThoughts`."""

    request: CanonicalRequest
    show_thoughts: bool = False


def decode_generate(
    body: object,
    *,
    model: str,
    request_id: str,
    signer: Signer,
    stream: bool,
    affinity_key: str | None = None,
) -> DecodedGemini:
    """Decode a `generateContent` body for the model the path names (already mapped); raises
    `ApiError` (400) naming the field."""
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    if _get(body, "cachedContent") is not None:
        raise unsupported(
            "cachedContent", "cached contents are not supported: send the whole conversation"
        )
    config = _Generation.read(_get(body, "generationConfig"))
    tools, web_search = _tools(body.get("tools"))
    request = CanonicalRequest(
        request_id=request_id,
        protocol=ClientProtocol.GEMINI,
        model=model,
        messages=_contents(body.get("contents"), signer),
        system=_system(_get(body, "systemInstruction")),
        tools=tools,
        tool_choice=_tool_config(_get(body, "toolConfig")),
        reasoning=config.reasoning,
        max_output_tokens=config.max_tokens,
        stop_sequences=config.stop,
        sampling=config.sampling,
        affinity_key=affinity_key,
        stream=stream,
        web_search=web_search,
    )
    return DecodedGemini(request, show_thoughts=config.show_thoughts)


def decode_count_tokens(
    body: object, *, model: str, request_id: str, signer: Signer
) -> CanonicalRequest:
    """A `countTokens` body: `contents` alone, or a whole `generateContentRequest`."""
    if not isinstance(body, dict):
        raise invalid("", "the request body must be a JSON object", "invalid_type")
    inner = _get(body, "generateContentRequest")
    if inner is not None:
        if not is_object(inner):
            raise invalid("generateContentRequest", "must be an object", "invalid_type")
        return decode_generate(
            dict(inner), model=model, request_id=request_id, signer=signer, stream=False
        ).request
    return decode_generate(
        {"contents": body.get("contents")},
        model=model,
        request_id=request_id,
        signer=signer,
        stream=False,
    ).request


# -- contents ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    id: str
    name: str


@dataclass(slots=True)
class _Conversation:
    """The turns being built, and the calls of the last model turn not yet answered."""

    signer: Signer
    merged: list[tuple[Role, list[Block]]] = field(default_factory=list)
    waiting: list[_Call] = field(default_factory=list)
    claimed: frozenset[str] = frozenset()  # ids the current turn's responses name
    thought: list[str] = field(default_factory=list)  # the open reasoning's pieces
    budget: BlockBudget = field(default_factory=BlockBudget)

    def append(self, role: Role, blocks: list[Block]) -> None:
        if self.merged and self.merged[-1][0] is role:
            self.merged[-1][1].extend(blocks)
        else:
            self.merged.append((role, blocks))

    def answered(self, call_id: str | None, name: str, path: str) -> str:
        """The id of the call a `functionResponse` answers."""
        if call_id:
            self.waiting = [call for call in self.waiting if call.id != call_id]
            return call_id
        call = next((c for c in self.waiting if c.name == name and c.id not in self.claimed), None)
        if call is None:
            raise invalid(
                path,
                f"a functionResponse must answer a functionCall of {quoted(name)} made by the "
                "model turn before it",
            )
        self.waiting.remove(call)
        return call.id


def _contents(value: object, signer: Signer) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise invalid("contents", "must be a non-empty list of contents", "invalid_type")
    at_most(len(value), MAX_MESSAGES, "contents", "contents")
    conversation = _Conversation(signer)
    for index, content in enumerate(value):
        path = f"contents[{index}]"
        if not is_object(content):
            raise invalid(path, "each content must be an object", "invalid_type")
        role = string_field(content, "role", path) or "user"
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise invalid(f"{path}.parts", "must be a list of parts", "invalid_type")
        conversation.budget.spend(len(parts), f"{path}.parts")
        if role == "model":
            blocks = _model_parts(parts, index, conversation)
            conversation.waiting = [
                _Call(block.id, block.name) for block in blocks if isinstance(block, ToolUseBlock)
            ]
            conversation.append(Role.ASSISTANT, blocks)
        elif role in ("user", "function"):
            conversation.append(Role.USER, _user_parts(parts, path, conversation))
        else:
            raise invalid(f"{path}.role", f"role {quoted(role)} is not one of user, model")
    # A turn left empty (a model turn of dropped thoughts) must not split its neighbours.
    turns: list[tuple[Role, list[Block]]] = []
    for speaker, blocks in conversation.merged:
        if turns and turns[-1][0] is speaker:
            turns[-1][1].extend(blocks)
        elif blocks:
            turns.append((speaker, blocks))
    messages = tuple(
        Message(speaker, _fused(blocks) if speaker is Role.ASSISTANT else tuple(blocks))
        for speaker, blocks in turns
    )
    if not messages:
        raise invalid("contents", "the conversation has no text, data or function part")
    return messages


def _fused(blocks: list[Block]) -> tuple[Block, ...]:
    """A model turn's adjacent text parts as one text: they are pieces of one answer, which
    google-genai's chat even keeps as one content per streamed chunk."""
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, TextBlock) and out and isinstance(out[-1], TextBlock):
            out[-1] = TextBlock(out[-1].text + block.text)
        else:
            out.append(block)
    return tuple(out)


def _part(value: object, path: str) -> Mapping[str, Any]:
    if not is_object(value):
        raise invalid(path, "each part must be an object", "invalid_type")
    for name, message in _REFUSED_PARTS.items():
        if _get(value, name) is not None:
            raise unsupported(f"{path}.{_key(value, name)}", message)
    return value


def _user_parts(parts: list[Any], path: str, conversation: _Conversation) -> list[Block]:
    conversation.thought = []
    conversation.claimed = frozenset(
        response["id"]
        for part in parts
        if is_object(part)
        and is_object(response := _get(part, "functionResponse"))
        and isinstance(response.get("id"), str)
    )
    blocks: list[Block] = []
    for index, item in enumerate(parts):
        part_path = f"{path}.parts[{index}]"
        part = _part(item, part_path)
        if part.get("thought") is True:
            continue  # a client's own notes to itself: not the user's words
        if (text := string_field(part, "text", part_path)) is not None:
            if text:
                blocks.append(TextBlock(text))
        elif (data := _get(part, "inlineData")) is not None:
            blocks.append(_inline(data, f"{part_path}.inlineData"))
        elif (response := _get(part, "functionResponse")) is not None:
            blocks.append(
                _function_response(response, f"{part_path}.functionResponse", conversation)
            )
        elif _get(part, "functionCall") is not None:
            raise invalid(f"{part_path}.functionCall", "function calls belong in a model turn")
    return blocks


def _model_parts(parts: list[Any], content_index: int, conversation: _Conversation) -> list[Block]:
    path = f"contents[{content_index}]"
    blocks: list[Block] = []
    thought = conversation.thought  # one reasoning may span contents: one per streamed chunk
    for index, item in enumerate(parts):
        part_path = f"{path}.parts[{index}]"
        part = _part(item, part_path)
        text = string_field(part, "text", part_path)
        if part.get("thought") is True:
            thought.append(text or "")
            signature = _text(part, "thoughtSignature", part_path)
            if signature:
                if (
                    block := _thinking("".join(thought), signature, conversation.signer)
                ) is not None:
                    blocks.append(block)
                thought.clear()
            continue
        if text:
            blocks.append(TextBlock(text))
        elif (call := _get(part, "functionCall")) is not None:
            blocks.append(_function_call(call, f"{part_path}.functionCall", content_index, index))
        elif _get(part, "inlineData") is not None:
            raise invalid(f"{part_path}.inlineData", "data parts are accepted in user turns only")
        elif _get(part, "functionResponse") is not None:
            raise invalid(
                f"{part_path}.functionResponse", "function responses belong in a user turn"
            )
    return blocks


def _thinking(text: str, signature: str, signer: Signer) -> ThinkingBlock | None:
    """The turn's reasoning when kirod signed exactly this text, to replay upstream; else None."""
    opened = opened_signature(signature)
    if not text or opened is None:
        return None
    verified = signer.verify(text, opened)
    if verified is None:
        return None
    return ThinkingBlock(text, verified.upstream_signature)


def _inline(value: object, path: str) -> ImageBlock | DocumentBlock:
    if not is_object(value):
        raise invalid(path, "must be an object with mimeType and data", "invalid_type")
    media_type = (_text(value, "mimeType", path, required=True) or "").lower()
    if media_type in IMAGE_TYPES:
        data = OPENAI.nonempty_text(value.get("data"), f"{path}.data")
        try:
            base64.b64decode(data[:16], validate=True)
        except (binascii.Error, ValueError):
            raise invalid(f"{path}.data", "is not valid base64") from None
        return ImageBlock(media_type, data)
    if media_type in DOCUMENT_MEDIA_TYPES:
        name = OPENAI.document_name(_get(value, "displayName"), f"{path}.displayName")
        data = OPENAI.document_data(value.get("data"), f"{path}.data")
        return DocumentBlock(name, DOCUMENT_MEDIA_TYPES[media_type], data)
    raise unsupported(
        f"{path}.mimeType",
        f"data of type {quoted(media_type)} is not supported; images (PNG, JPEG, GIF, WebP) "
        "and documents (" + ", ".join(DOCUMENT_MEDIA_TYPES) + ") are",
    )


def _function_call(value: object, path: str, content_index: int, index: int) -> ToolUseBlock:
    if not is_object(value):
        raise invalid(path, "must be an object with a name", "invalid_type")
    name = string_field(value, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    call_id = string_field(value, "id", path) or f"call_{content_index}_{index}"
    args = value.get("args")
    if args is None:
        args = {}
    elif not is_object(args):
        raise invalid(f"{path}.args", "must be an object", "invalid_type")
    return ToolUseBlock(call_id, name, args)


def _function_response(value: object, path: str, conversation: _Conversation) -> ToolResultBlock:
    if not is_object(value):
        raise invalid(path, "must be an object with a name and a response", "invalid_type")
    name = string_field(value, "name", path, required=True) or ""
    call_id = conversation.answered(string_field(value, "id", path), name, path)
    response = value.get("response")
    if response is None:
        response = {}
    elif not is_object(response):
        raise invalid(f"{path}.response", "must be an object", "invalid_type")
    text, is_error = _response_text(response)
    content: list[TextBlock | ImageBlock | DocumentBlock] = [TextBlock(text)] if text else []
    parts = value.get("parts")
    if parts is not None:
        if not isinstance(parts, list):
            raise invalid(f"{path}.parts", "must be a list of parts", "invalid_type")
        conversation.budget.spend(len(parts), f"{path}.parts")
        for index, part in enumerate(parts):
            part_path = f"{path}.parts[{index}]"
            item = _part(part, part_path)
            if (data := _get(item, "inlineData")) is not None:
                content.append(_inline(data, f"{part_path}.inlineData"))
            elif part_text := string_field(item, "text", part_path):
                content.append(TextBlock(part_text))
    return ToolResultBlock(call_id, tuple(content), is_error)


def _response_text(response: Mapping[str, Any]) -> tuple[str, bool]:
    """What the function returned, as the model reads it: Google's convention is `output` for a
    result and `error` for a failure (Gemini CLI sends `{"output": "…"}`); anything else is the
    response object as JSON."""
    if len(response) == 1:
        ((key, value),) = response.items()
        if key in ("output", "error") and isinstance(value, str):
            return value, key == "error"
    return (json.dumps(response, ensure_ascii=False) if response else ""), False


def _system(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if not is_object(value):
        raise invalid("systemInstruction", "must be a content with text parts", "invalid_type")
    parts = value.get("parts")
    if not isinstance(parts, list):
        raise invalid("systemInstruction.parts", "must be a list of parts", "invalid_type")
    texts: list[str] = []
    for index, part in enumerate(parts):
        path = f"systemInstruction.parts[{index}]"
        if not is_object(part):
            raise invalid(path, "each part must be an object", "invalid_type")
        text = string_field(part, "text", path)
        if text is None:
            raise invalid(path, "system instructions take text parts only")
        if text:
            texts.append(text)
    return tuple(texts)


# -- tools ---------------------------------------------------------------------------------------


def _tools(value: object) -> tuple[tuple[ToolSpec, ...], WebSearch | None]:
    if value is None:
        return (), None
    if not isinstance(value, list):
        raise invalid("tools", "must be a list", "invalid_type")
    specs: list[ToolSpec] = []
    names: set[str] = set()
    web_search: WebSearch | None = None
    for index, tool in enumerate(value):
        path = f"tools[{index}]"
        if not is_object(tool):
            raise invalid(path, "each tool must be an object", "invalid_type")
        for name, message in _REFUSED_TOOLS.items():
            if _get(tool, name) is not None:
                raise unsupported(f"{path}.{_key(tool, name)}", message)
        if any(_get(tool, name) is not None for name in _SEARCH_TOOLS):
            web_search = WebSearch()
        declarations = _get(tool, "functionDeclarations")
        if declarations is None:
            continue
        if not isinstance(declarations, list):
            raise invalid(f"{path}.functionDeclarations", "must be a list", "invalid_type")
        at_most(len(specs) + len(declarations), MAX_TOOLS, "tools", "function declarations")
        for number, declaration in enumerate(declarations):
            spec = _declaration(declaration, f"{path}.functionDeclarations[{number}]")
            if spec.name in names:
                raise invalid(
                    f"{path}.functionDeclarations[{number}].name",
                    f"function {quoted(spec.name)} is declared twice",
                )
            names.add(spec.name)
            specs.append(spec)
    return tuple(specs), web_search


_EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}


def _declaration(value: object, path: str) -> ToolSpec:
    if not is_object(value):
        raise invalid(path, "each declaration must be an object", "invalid_type")
    name = string_field(value, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    description = string_field(value, "description", path) or ""
    key = _key(value, "parametersJsonSchema")  # google-genai: `parameters_json_schema`
    schema = value.get(key)
    if schema is not None:
        if not is_object(schema):
            raise invalid(f"{path}.{key}", "must be a JSON schema object", "invalid_type")
        return ToolSpec(name, description, schema)
    parameters = value.get("parameters")
    if parameters is None:
        return ToolSpec(name, description, _EMPTY_SCHEMA)
    if not is_object(parameters):
        raise invalid(f"{path}.parameters", "must be a schema object", "invalid_type")
    return ToolSpec(name, description, json_schema(parameters))


def _tool_config(value: object) -> ToolChoice:
    """AUTO and NONE are honoured; Kiro cannot force a call, so ANY (and VALIDATED, which may
    force one) is a 400, as a forced tool choice is on the other APIs."""
    if value is None:
        return ToolChoice()
    if not is_object(value):
        raise invalid("toolConfig", "must be an object", "invalid_type")
    calling = _get(value, "functionCallingConfig")
    if calling is None:
        return ToolChoice()
    if not is_object(calling):
        raise invalid("toolConfig.functionCallingConfig", "must be an object", "invalid_type")
    mode = (string_field(calling, "mode", "toolConfig.functionCallingConfig") or "AUTO").upper()
    if mode in ("AUTO", "MODE_UNSPECIFIED"):
        return ToolChoice(ToolChoiceMode.AUTO)
    if mode == "NONE":
        return ToolChoice(ToolChoiceMode.NONE)
    if mode in ("ANY", "VALIDATED"):
        raise unsupported(
            "toolConfig.functionCallingConfig.mode",
            "forcing a function call is not supported by Kiro; use mode AUTO or NONE",
        )
    raise invalid(
        "toolConfig.functionCallingConfig.mode", "must be one of AUTO, ANY, NONE, VALIDATED"
    )


# -- generation config ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Generation:
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    reasoning: Reasoning | None = None
    show_thoughts: bool = False

    @classmethod
    def read(cls, value: object) -> _Generation:
        if value is None:
            return cls()
        if not is_object(value):
            raise invalid("generationConfig", "must be an object", "invalid_type")
        path = "generationConfig"
        _refuse_structured(value)
        count = _get(value, "candidateCount")
        if count is not None and OPENAI.integer(count, f"{path}.candidateCount") != 1:
            raise unsupported(
                f"{path}.candidateCount", "only one candidate per request is supported"
            )
        if _get(value, "responseLogprobs") is True or value.get("logprobs") is not None:
            raise unsupported(f"{path}.responseLogprobs", "log probabilities are not supported")
        modalities = _get(value, "responseModalities")
        if modalities is not None and (
            not isinstance(modalities, list)
            or any(not isinstance(m, str) or m.upper() != "TEXT" for m in modalities)
        ):
            raise unsupported(f"{path}.responseModalities", "only TEXT answers are supported")
        if _get(value, "speechConfig") is not None:
            raise unsupported(f"{path}.speechConfig", "speech output is not supported")
        limit = _get(value, "maxOutputTokens")
        if limit is not None:
            limit = OPENAI.positive_integer(limit, f"{path}.maxOutputTokens")
        reasoning, show = _thinking_config(_get(value, "thinkingConfig"))
        return cls(
            max_tokens=limit,
            stop=_stop(_get(value, "stopSequences")),
            sampling=Sampling(
                temperature=OPENAI.number(value.get("temperature"), f"{path}.temperature", 0, 2),
                top_p=OPENAI.number(_get(value, "topP"), f"{path}.topP", 0, 1),
                top_k=_top_k(_get(value, "topK")),
            ),
            reasoning=reasoning,
            show_thoughts=show,
        )


def _refuse_structured(config: Mapping[str, Any]) -> None:
    for camel in ("responseSchema", "responseJsonSchema", "_responseJsonSchema"):
        key = _key(config, camel)
        if config.get(key) is not None:
            raise unsupported(
                f"generationConfig.{key}",
                "structured output is not supported: Kiro cannot guarantee an answer in a "
                "schema; leave the schema out and describe the shape in the prompt",
            )
    mime = _get(config, "responseMimeType")
    if mime is not None and (not isinstance(mime, str) or mime.lower() not in _TEXT_TYPES):
        raise unsupported(
            "generationConfig.responseMimeType",
            f"answers of type {quoted(mime)} are not supported: Kiro cannot guarantee JSON; "
            "use text/plain",
        )


def _top_k(value: object) -> int | None:
    """`topK`: an integer, which google-genai types as a float (64.0)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    top_k = OPENAI.integer(value, "generationConfig.topK")
    if top_k < 0:
        raise invalid("generationConfig.topK", "must not be negative")
    return top_k


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    path = "generationConfig.stopSequences"
    if not isinstance(value, list) or not all(isinstance(stop, str) for stop in value):
        raise invalid(path, "must be a list of strings", "invalid_type")
    at_most(len(value), _MAX_STOP_SEQUENCES, path, "stop sequences")
    return tuple(value)


def _thinking_config(value: object) -> tuple[Reasoning | None, bool]:
    """(the reasoning asked for, whether to show it)."""
    if value is None:
        return None, False
    path = "generationConfig.thinkingConfig"
    if not is_object(value):
        raise invalid(path, "must be an object", "invalid_type")
    show = _get(value, "includeThoughts")
    if show is not None:
        OPENAI.boolean(show, f"{path}.includeThoughts")
    effort: Effort | None = None
    level = _get(value, "thinkingLevel")
    if level is not None:
        word = level.lower() if isinstance(level, str) else None
        if word == "thinking_level_unspecified":
            word = None
        elif word not in _LEVELS:
            raise invalid(f"{path}.thinkingLevel", "must be one of MINIMAL, LOW, MEDIUM, HIGH")
        effort = _LEVELS[word] if word else None
    budget = _get(value, "thinkingBudget")
    if budget is not None:
        tokens = OPENAI.integer(budget, f"{path}.thinkingBudget")
        if tokens == 0:
            return None, False
        if tokens < -1:
            raise invalid(f"{path}.thinkingBudget", "must be -1 (dynamic), 0 (off) or positive")
        if tokens > 0:
            return Reasoning(effort=effort, budget_tokens=tokens), show is True
    if show is True or effort is not None or budget == -1:
        return Reasoning(effort=effort), show is True
    return None, False

"""The checks Kiro applies to a GenerateAssistantResponse body before answering (pure).

Each rule is one 400 that peers hit and documented (docs/KIRO-PROTOCOL.md §2.3 to §2.6, §4.2); the
fake enforces all of them so that kirod's payload builder is tested against the same walls. Most
produce the service's famously unhelpful `{"message":"Improperly formed request.","reason":null}`.

Images are checked as the model behind Kiro checks them (docs/UPSTREAM.md §6): at most
`MAX_IMAGE_BASE64` characters of base64 each, at most `MAX_IMAGE_SIDE` pixels a side, and at most
`MANY_IMAGES_SIDE` when the request holds more than `MANY_IMAGES`; their size is read by Pillow
from the header alone, and an image it cannot read is not judged. The body limit does not count
the images' base64, which reaches that per-image check through Kiro.

Token estimate: every character of every string (keys included) in `conversationState`, images
and documents excluded, divided by 4 and rounded up. Crude, but deterministic and in the right
order of magnitude for English text and JSON.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from kirod.testing.fake_kiro.catalog import Model

MAX_BODY_BYTES = 600_000
"""Bodies above this, less their images' base64, fail (jwadow measured failures above ~615 KB)."""
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8_000
MANY_IMAGES = 20
MANY_IMAGES_SIDE = 2_000

MAX_TOOL_NAME_LENGTH = 64
THINKING_TAG = "<thinking_mode>"
"""The prompt tag that asks Claude for `<thinking>` text (docs/KIRO-PROTOCOL.md §2.5)."""
CHAT_TRIGGER_TYPES = frozenset({"MANUAL", "DIAGNOSTIC", "INLINE_CHAT"})
IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})
DOCUMENT_FORMATS = frozenset({"pdf", "csv", "doc", "docx", "html", "md", "txt", "xls", "xlsx"})
DOCUMENT_NAME = re.compile(r"[A-Za-z0-9\-_()\[\]]+( [A-Za-z0-9\-_()\[\]]+)*")
"""A document's name: 1-200 characters of ASCII letters, digits, space, hyphen, underscore,
parentheses and square brackets, no leading, trailing or double space (sunerpy/kiro-provider
docs/audits/kiro-provider-runtime-model-and-session-validation-2026-08-28.md, 2026-08-28,
measured on Opus 5)."""
MAX_DOCUMENT_NAME = 200

_COMBINATORS = ("oneOf", "anyOf", "allOf")
_REASONING_KEY = b"fake-kiro reasoning signature key"
_MALFORMED = {"message": "Improperly formed request.", "reason": None}


@dataclass(frozen=True)
class Rule:
    """What one rule rejects and the response the service gives for it."""

    description: str
    status: int = 400
    body: Mapping[str, Any] = field(default_factory=lambda: dict(_MALFORMED))
    error_type: str = "ValidationException"


RULES: dict[str, Rule] = {
    "body_too_large": Rule(f"body larger than {MAX_BODY_BYTES} bytes, images not counted"),
    "malformed_json": Rule("body is not a JSON object"),
    "malformed_field": Rule("a field has the wrong JSON type or a history entry is not one role"),
    "missing_current_message": Rule("no conversationState.currentMessage.userInputMessage"),
    "current_not_user": Rule("currentMessage is an assistant message"),
    "invalid_model_id": Rule(
        "modelId unknown to the catalog",
        body={
            "message": "Invalid model. Please select a different model to continue.",
            "reason": "INVALID_MODEL_ID",
        },
    ),
    "invalid_chat_trigger_type": Rule("chatTriggerType not MANUAL, DIAGNOSTIC or INLINE_CHAT"),
    "empty_assistant_content": Rule("assistant content empty or missing, and no toolUses"),
    "empty_user_content": Rule("user content empty without toolResults"),
    "cache_point_in_tools": Rule("a cachePoint element in tools"),
    "invalid_cache_point": Rule('a message cachePoint other than {"type": "default"}'),
    "cache_points_unsupported": Rule("message cachePoints for a model without promptCaching"),
    "too_many_cache_points": Rule("more cachePoints than maximumCacheCheckpointsPerRequest"),
    "tool_name_too_long": Rule(f"tool name longer than {MAX_TOOL_NAME_LENGTH} characters"),
    "invalid_tool_schema": Rule("tool inputSchema with a null value or a non-string type"),
    "tool_schema_not_object": Rule(
        "tool inputSchema whose top level is not type object, or has a oneOf/anyOf/allOf",
        body={"message": "Improperly formed request.", "reason": "TOOL_SCHEMA_INVALID"},
    ),
    "tool_results_without_tools": Rule("toolResults in a request that declares no tools"),
    "duplicate_tool_result": Rule("one toolUseId twice in a message's toolResults"),
    "orphan_tool_result": Rule("toolResult not answering the preceding assistant's toolUses"),
    "thinking_tags_on_tool_results": Rule(
        "<thinking_mode> prompt tags in a user turn that carries toolResults"
    ),
    "unanswered_tool_use": Rule("assistant toolUses not answered by the next user toolResults"),
    "undeclared_history_tool": Rule("history uses a tool the current tools do not declare"),
    "tool_input_not_object": Rule(
        "toolUses input is not a JSON object",
        body={"message": "Invalid tool use format.", "reason": "REQUEST_BODY_INVALID"},
    ),
    "empty_input_key": Rule("tool input object with an empty-string key"),
    "misplaced_images": Rule("images anywhere but userInputMessage.images"),
    "invalid_image": Rule("image without a known format or base64 source.bytes"),
    "images_unsupported": Rule("images sent to a text-only model"),
    "image_too_large": Rule(
        f"an image of more than {MAX_IMAGE_BASE64} base64 characters",
        body={"message": f"image exceeds 5 MB maximum: {MAX_IMAGE_BASE64} bytes", "reason": None},
    ),
    "image_too_wide": Rule(
        f"an image with a side above {MAX_IMAGE_SIDE} pixels",
        body={
            "message": "At least one of the image dimensions exceed max allowed size: "
            f"{MAX_IMAGE_SIDE} pixels",
            "reason": None,
        },
    ),
    "many_images_too_wide": Rule(
        f"more than {MANY_IMAGES} images and one with a side above {MANY_IMAGES_SIDE} pixels",
        body={
            "message": "At least one of the image dimensions exceed max allowed size for "
            f"many-image requests: {MANY_IMAGES_SIDE} pixels",
            "reason": None,
        },
    ),
    "misplaced_documents": Rule("documents anywhere but userInputMessage.documents"),
    "invalid_document": Rule("document without a name, a known format or base64 source.bytes"),
    "invalid_document_name": Rule("document name outside Kiro's name rule (DOCUMENT_NAME)"),
    "documents_unsupported": Rule(
        "documents sent to a non-Claude model whose inputs lack DOCUMENT"
    ),
    "request_fields_without_schema": Rule(
        "additionalModelRequestFields for a model whose catalog entry lists no schema",
        body={"message": "Improperly formed request.", "reason": "REQUEST_BODY_INVALID"},
    ),
    "unsupported_request_fields": Rule(
        "additionalModelRequestFields not allowed by the model's schema (the message names why)",
        body={"message": "Invalid additionalModelRequestFields", "reason": "REQUEST_BODY_INVALID"},
    ),
    "flat_reasoning_content": Rule(
        "reasoningContent not nested as reasoningText{text, signature}",
        body={"message": "Improperly formed request.", "reason": "REQUEST_BODY_INVALID"},
    ),
    "reasoning_signature_invalid": Rule(
        "reasoningContent signature missing, not issued by the fake, or issued under another "
        "tool list (then without a reason)",
        body={
            "message": "Invalid `signature` in `thinking` block",
            "reason": "THINKING_SIGNATURE_INVALID",
        },
    ),
    "context_too_long": Rule(
        "estimated input tokens above the model's prompt limit (maxInputTokens, or its real "
        "window less its output limit)",
        body={"message": "Input is too long.", "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD"},
    ),
}
"""Every rule by name, in the order they are checked."""


@dataclass(frozen=True)
class Rejection:
    """A 400 the fake answers instead of streaming; `rule` names the broken rule."""

    rule: str
    status: int
    body: Mapping[str, Any]
    error_type: str


def validate_chat(body: bytes, models: Mapping[str, Model]) -> Rejection | None:
    """Return why Kiro would reject this GenerateAssistantResponse body, or None."""
    try:
        _check(body, models)
    except _Broken as broken:
        rule = RULES[broken.rule]
        return Rejection(broken.rule, rule.status, broken.body or rule.body, rule.error_type)
    return None


def estimate_tokens(conversation_state: Any) -> int:
    """Estimated input tokens of a conversation: string characters / 4 (see module docstring)."""
    return math.ceil(_string_chars(conversation_state) / 4)


def reasoning_signature(text: str, tools: Iterable[str] = ()) -> str:
    """The signature the fake puts on native reasoning, and checks when it comes back.

    It binds the tool list the reasoning was made under (names, case-insensitive): replayed under
    another list it is refused, as Kiro refused one after Claude Code dropped a tool between turns
    (sunerpy/kiro-provider docs/audits/kiro-protocol-evidence-probe-2026-09-02.zh.md B25,
    2026-09-02; fable-recovery-and-admission-2026-09-20.zh.md, 2026-09-20).
    """
    bound = "\0".join([text, *sorted({name.lower() for name in tools})])
    digest = hmac.new(_REASONING_KEY, bound.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest + _text_mark(text)).decode("ascii")


def _text_mark(text: str) -> bytes:
    """What says the fake signed this text, under whichever tool list."""
    return hmac.new(_REASONING_KEY, text.encode("utf-8"), hashlib.sha256).digest()[:8]


class _Broken(Exception):
    def __init__(self, rule: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(rule)
        self.rule = rule
        self.body = body  # None: the rule's own


def _check(body: bytes, models: Mapping[str, Model]) -> None:
    try:
        root = json.loads(body)
    except (ValueError, RecursionError):
        raise _Broken(
            "body_too_large" if len(body) > MAX_BODY_BYTES else "malformed_json"
        ) from None
    if not isinstance(root, dict):
        raise _Broken("malformed_json")
    if len(body) - _image_chars(root) > MAX_BODY_BYTES:
        raise _Broken("body_too_large")
    state = root.get("conversationState")
    current = state.get("currentMessage") if isinstance(state, dict) else None
    if not isinstance(state, dict) or not isinstance(current, dict):
        raise _Broken("missing_current_message")
    if "userInputMessage" not in current:
        has_assistant = "assistantResponseMessage" in current
        raise _Broken("current_not_user" if has_assistant else "missing_current_message")
    user = _object(current["userInputMessage"])
    model_id = user.get("modelId")
    model = models.get(model_id) if isinstance(model_id, str) else None
    if model is None:
        raise _Broken("invalid_model_id")
    trigger = state.get("chatTriggerType")
    if not isinstance(trigger, str) or trigger not in CHAT_TRIGGER_TYPES:
        raise _Broken("invalid_chat_trigger_type")
    # No rule on the order of roles: history may open with an assistant entry, hold two adjacent
    # entries of one role, and end with a user entry (sunerpy/kiro-provider
    # docs/audits/kiro-protocol-projection-probe-2026-08-26.md and
    # kiro-protocol-evidence-probe-2026-09-02.zh.md; yupanzi/kiro2claude docs/PITFALLS.md,
    # 2026-09-11, 7 of 7 accepted). The 400s peers once met for these are gone.
    turns = [*_history(state.get("history", [])), ("user", user)]
    for role, message in turns:
        _check_content(role, message)
    _check_cache_points(turns, model)
    declared = _check_tools(_list(_context(user).get("tools", [])))
    _check_tool_pairing(turns, declared)
    _check_images(turns, model)
    _check_documents(turns, model)
    _check_request_fields(root.get("additionalModelRequestFields"), model)
    for role, message in turns:
        if role == "assistant" and "reasoningContent" in message:
            _check_reasoning(message["reasoningContent"], declared)
    tokens = estimate_tokens(state)
    if tokens > model.prompt_limit:
        raise _Broken("context_too_long", _too_long(model, tokens))


def _too_long(model: Model, tokens: int) -> Mapping[str, Any] | None:
    """A model with a real window names its prompt maximum: "model maximum (872000)" for GPT-5.6
    (sunerpy/kiro-provider docs/audits/kiro-gpt56-sol-1m-context-probe-2026-09-06.zh.md,
    2026-09-06, quotes that and the prompt's count; the rest of the sentence is the fake's)."""
    if model.window is None:
        return None
    message = f"Input is too long: prompt of {tokens} tokens exceeds the model maximum "
    return {
        "message": f"{message}({model.prompt_limit}).",
        "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD",
    }


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Broken("malformed_field")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _Broken("malformed_field")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Broken("malformed_field")
    return value


def _context(user: dict[str, Any]) -> dict[str, Any]:
    return _object(user.get("userInputMessageContext", {}))


def _history(history: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    for entry in _list(history):
        entry = _object(entry)
        if len(entry) != 1:
            raise _Broken("malformed_field")
        if "userInputMessage" in entry:
            yield "user", _object(entry["userInputMessage"])
        elif "assistantResponseMessage" in entry:
            yield "assistant", _object(entry["assistantResponseMessage"])
        else:
            raise _Broken("malformed_field")


def _check_content(role: str, message: dict[str, Any]) -> None:
    """Empty content only beside what the entry carries: a user entry's toolResults (the kiro-cli
    fixture), an assistant entry's toolUses (sunerpy/kiro-provider
    docs/audits/kiro-protocol-evidence-probe-2026-09-02.zh.md, B25: `content: ""` with a signed
    reasoning block and toolUses, accepted, 2026-09-02)."""
    content = _string(message.get("content", ""))
    if content:
        return
    if role == "assistant":
        if not _list(message.get("toolUses", [])):
            raise _Broken("empty_assistant_content")
    elif not _list(_context(message).get("toolResults", [])):
        raise _Broken("empty_user_content")


def _check_cache_points(turns: list[tuple[str, dict[str, Any]]], model: Model) -> None:
    """Message-level `cachePoint`s (docs/UPSTREAM.md §1.1): one shape, a per-model budget
    (docs/UPSTREAM.md §1.3)."""
    points = [message["cachePoint"] for _, message in turns if "cachePoint" in message]
    if not points:
        return
    if any(point != {"type": "default"} for point in points):
        raise _Broken("invalid_cache_point")
    if not model.cache_checkpoints:
        raise _Broken("cache_points_unsupported")
    if len(points) > model.cache_checkpoints:
        raise _Broken("too_many_cache_points")


def _check_tools(tools: list[Any]) -> set[str]:
    """Validate tool declarations; return their names, lower-cased."""
    declared: set[str] = set()
    for item in tools:
        item = _object(item)
        if "cachePoint" in item:
            raise _Broken("cache_point_in_tools")
        spec = _object(item.get("toolSpecification"))
        name = _string(spec.get("name"))
        if len(name) > MAX_TOOL_NAME_LENGTH:
            raise _Broken("tool_name_too_long")
        schema = _object(_object(spec.get("inputSchema")).get("json"))
        if _has_null(schema) or not _schema_types_are_strings(schema):
            raise _Broken("invalid_tool_schema")
        if schema.get("type") != "object" or any(key in schema for key in _COMBINATORS):
            raise _Broken("tool_schema_not_object")  # docs/KIRO-PROTOCOL.md §4.2
        declared.add(name.lower())
    return declared


def _has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_has_null(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_null(item) for item in value)
    return False


def _schema_types_are_strings(schema: Any) -> bool:
    """Walk schema keywords only, so a property *named* `type` is not mistaken for one."""
    if not isinstance(schema, dict):
        return True
    if "type" in schema and not isinstance(schema["type"], str):
        return False
    children: list[Any] = []
    for keyword in ("properties", "$defs", "definitions", "patternProperties"):
        if isinstance(schema.get(keyword), dict):
            children.extend(schema[keyword].values())
    for keyword in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(keyword), list):
            children.extend(schema[keyword])
    children.extend(schema.get(keyword) for keyword in ("items", "additionalProperties", "not"))
    return all(_schema_types_are_strings(child) for child in children)


def _check_tool_pairing(turns: list[tuple[str, dict[str, Any]]], declared: set[str]) -> None:
    results = {
        index: [_object(result) for result in _list(_context(message).get("toolResults", []))]
        for index, (role, message) in enumerate(turns)
        if role == "user"
    }
    if not declared and any(results.values()):
        raise _Broken("tool_results_without_tools")
    previous_uses: set[str] = set()
    for index, (role, message) in enumerate(turns):
        if role == "assistant":
            previous_uses = _check_tool_uses(_list(message.get("toolUses", [])), declared)
            continue
        for result in results[index]:
            _check_result_shape(result)
        if results[index] and THINKING_TAG in _string(message.get("content", "")):
            raise _Broken("thinking_tags_on_tool_results")
        ids = [_string(result.get("toolUseId")) for result in results[index]]
        if len(ids) != len(set(ids)):
            raise _Broken("duplicate_tool_result")
        if not set(ids) <= previous_uses:
            raise _Broken("orphan_tool_result")
        if previous_uses - set(ids):
            raise _Broken("unanswered_tool_use")
        previous_uses = set()


def _check_result_shape(result: dict[str, Any]) -> None:
    """`content` is a list of `{"text": str}` / `{"json": …}` blocks; `status` an enum."""
    if result.get("status", "success") not in ("success", "error"):
        raise _Broken("malformed_field")
    for block in _list(result.get("content", [])):
        block = _object(block)
        if "text" in block:
            _string(block["text"])
        elif "json" not in block and "image" not in block:  # images: misplaced_images
            raise _Broken("malformed_field")


def _check_tool_uses(uses: list[Any], declared: set[str]) -> set[str]:
    ids: set[str] = set()
    for use in uses:
        use = _object(use)
        ids.add(_string(use.get("toolUseId")))
        if _string(use.get("name")).lower() not in declared:
            raise _Broken("undeclared_history_tool")
        tool_input = use.get("input", {})
        if not isinstance(tool_input, dict):
            raise _Broken("tool_input_not_object")
        if _has_empty_key(tool_input):
            raise _Broken("empty_input_key")
    return ids


def _has_empty_key(value: Any) -> bool:
    if isinstance(value, dict):
        return "" in value or any(_has_empty_key(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_empty_key(item) for item in value)
    return False


def _check_images(turns: list[tuple[str, dict[str, Any]]], model: Model) -> None:
    images: list[Any] = []
    for role, message in turns:
        if role == "assistant":
            if "images" in message:
                raise _Broken("misplaced_images")
            continue
        images.extend(_list(message.get("images", [])))
        context = _context(message)
        results = [_object(result) for result in _list(context.get("toolResults", []))]
        if "images" in context or any(_result_has_image(result) for result in results):
            raise _Broken("misplaced_images")
    if images and "IMAGE" not in model.input_types:
        raise _Broken("images_unsupported")
    for image in images:
        image = _object(image)
        source = _object(image.get("source"))
        image_format = image.get("format")
        known = isinstance(image_format, str) and image_format in IMAGE_FORMATS
        if not known or not isinstance(source.get("bytes"), str):
            raise _Broken("invalid_image")
    side = MANY_IMAGES_SIDE if len(images) > MANY_IMAGES else MAX_IMAGE_SIDE
    for image in images:
        data = image["source"]["bytes"]
        if len(data) > MAX_IMAGE_BASE64:
            raise _Broken("image_too_large")
        size = _image_size(data)
        if size is not None and max(size) > side:
            raise _Broken("image_too_wide" if side == MAX_IMAGE_SIDE else "many_images_too_wide")


def _image_size(data: str) -> tuple[int, int] | None:
    """(width, height) from the image's header (Pillow decodes no pixels for it); None when
    Pillow cannot read one. A header past Pillow's decompression-bomb bound is far too wide."""
    try:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            return image.size
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return (MAX_IMAGE_SIDE + 1, MAX_IMAGE_SIDE + 1)
    except (OSError, SyntaxError, ValueError, binascii.Error):
        return None


def _image_chars(root: dict[str, Any]) -> int:
    """The base64 characters of the body's images, wherever they are (a misplaced one too)."""

    def walk(value: Any) -> int:
        if isinstance(value, dict):
            found = value.get("images")
            own = sum(_image_bytes(image) for image in found) if isinstance(found, list) else 0
            return own + sum(walk(item) for key, item in value.items() if key != "images")
        if isinstance(value, list):
            return sum(walk(item) for item in value)
        return 0

    return walk(root)


def _image_bytes(image: Any) -> int:
    source = image.get("source") if isinstance(image, dict) else None
    data = source.get("bytes") if isinstance(source, dict) else None
    return len(data) if isinstance(data, str) else 0


def _check_documents(turns: list[tuple[str, dict[str, Any]]], model: Model) -> None:
    """`documents[]` items as the request model defines them: `name`, `format`, `source.bytes`.

    Claude reads them though no catalog entry lists DOCUMENT: sunerpy/kiro-provider sent a `txt`
    and other files to Opus 5 and the model read them (docs/audits/kiro-provider-runtime-model-
    and-session-validation-2026-08-28.md, 2026-08-28). Other models take them only where the
    catalog lists DOCUMENT: nobody has reported what they do with one.
    """
    documents: list[Any] = []
    for role, message in turns:
        if "documents" in _context(message) or (role == "assistant" and "documents" in message):
            raise _Broken("misplaced_documents")
        if role == "user":
            documents.extend(_list(message.get("documents", [])))
    if not documents:
        return
    if "DOCUMENT" not in model.input_types and not model.model_id.startswith("claude-"):
        raise _Broken("documents_unsupported")
    for document in documents:
        document = _object(document)
        name, data = document.get("name"), _object(document.get("source")).get("bytes")
        document_format = document.get("format")
        if (
            not isinstance(name, str)
            or not isinstance(document_format, str)
            or document_format not in DOCUMENT_FORMATS
            or not isinstance(data, str)
            or not _is_base64(data)
        ):
            raise _Broken("invalid_document")
        if len(name) > MAX_DOCUMENT_NAME or not DOCUMENT_NAME.fullmatch(name):
            raise _Broken("invalid_document_name")


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error is one
        return False
    return True


def _result_has_image(result: dict[str, Any]) -> bool:
    blocks = _list(result.get("content", []))
    return "images" in result or any(isinstance(b, dict) and "image" in b for b in blocks)


def _check_request_fields(fields: Any, model: Model) -> None:
    """The root fields as the model's schema allows them, strictly.

    Kiro names what broke the schema: "Invalid additionalModelRequestFields: property 'X' is not
    defined in the schema and the schema does not allow additional properties" and "…: must have a
    maximum value of 128000.0", both `REQUEST_BODY_INVALID` (sunerpy/kiro-provider
    docs/audits/evidence/opus-5-5-catalog-probe-2026-09-26/request-fields.json and
    output-token-bounds.json, 2026-09-26). The wording of an enum or type refusal is not
    published; the fake words them in the same validator's style. A model with no schema (the 4.5
    generation) refuses any root field; how Kiro words that is not published either, so the fake
    answers the generic `REQUEST_BODY_INVALID` (docs/KIRO-PROTOCOL.md §2.6).
    """
    if fields is None:
        return
    schema = model.request_fields_schema
    if schema is None:
        raise _Broken("request_fields_without_schema")
    problem = _schema_problem(fields, schema)
    if problem is not None:
        body = {
            "message": f"Invalid additionalModelRequestFields: {problem}",
            "reason": "REQUEST_BODY_INVALID",
        }
        raise _Broken("unsupported_request_fields", body)


def _schema_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """What breaks the subset of JSON Schema the catalog's request-field schemas use, or None."""
    if "enum" in schema and value not in schema["enum"]:
        return f"does not have a value in the enumeration {json.dumps(schema['enum'])}"
    expected = schema.get("type")
    if expected == "string" and not isinstance(value, str):
        return f"{_json_type(value)} found, string expected"
    if expected == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{_json_type(value)} found, integer expected"
        if "minimum" in schema and value < schema["minimum"]:
            return f"must have a minimum value of {float(schema['minimum'])}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"must have a maximum value of {float(schema['maximum'])}"
    if expected != "object":
        return None
    if not isinstance(value, dict):
        return f"{_json_type(value)} found, object expected"
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key, item in value.items():
        if key not in properties:
            if schema.get("additionalProperties", True) is False:
                return (
                    f"property '{key}' is not defined in the schema and the schema does not "
                    "allow additional properties"
                )
            continue
        problem = _schema_problem(item, properties[key])
        if problem is not None:
            return problem
    missing = [key for key in schema.get("required", []) if key not in value]
    return f"required property '{missing[0]}' not found" if missing else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "integer" if isinstance(value, int) else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "null"


def _check_reasoning(reasoning: Any, tools: set[str]) -> None:
    if isinstance(reasoning, dict) and set(reasoning) == {"redactedContent"}:
        return
    nested = reasoning.get("reasoningText") if isinstance(reasoning, dict) else None
    if not isinstance(nested, dict):
        raise _Broken("flat_reasoning_content")
    text, signature = nested.get("text"), nested.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str):
        raise _Broken("reasoning_signature_invalid")
    if hmac.compare_digest(signature, reasoning_signature(text, tools)):
        return
    try:
        mark = base64.b64decode(signature, validate=True)[32:]
    except ValueError:
        mark = b""
    if hmac.compare_digest(mark, _text_mark(text)):
        # The fake's own signature, made under another tool list: refused, and without a reason,
        # as Kiro sometimes words it (docs/KIRO-PROTOCOL.md §2.6).
        body = {"message": "Invalid `signature` in `thinking` block", "reason": None}
        raise _Broken("reasoning_signature_invalid", body)
    raise _Broken("reasoning_signature_invalid")


def _string_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_string_chars(item) for item in value)
    if isinstance(value, dict):
        return sum(
            len(key) + _string_chars(item)
            for key, item in value.items()
            if key not in ("images", "documents")
        )
    return 0

"""OpenAI Responses request body → `CanonicalRequest`, plus what the encoder and store need.

Conversation: `history` (the stored items of `previous_response_id`, loaded by the caller) then
`input`, both as Responses items. `instructions` and every `system`/`developer` message become
system text in order; user and assistant content, `function_call`/`function_call_output` pairs
and replayable `reasoning` items become canonical blocks, consecutive blocks of one role merged
into one message. Reasoning replays only when its `encrypted_content` was sealed by this
install's `ReasoningBox`; anything else is dropped (and counted for the log line).

Tools. `function` tools map one to one. A `namespace` tool (Codex: `{type: "namespace", name,
description, tools: [function tools]}`) is flattened into its functions named
`<namespace>__<function>` (Codex's own flattening: trailing `_` of the namespace and leading `_`
of the function trimmed); `ResponseEcho.tool_names` maps each flat name back, and the encoder
emits such calls as `function_call` items with `namespace` and `name` split again, which is how
Codex routes them. An input `function_call` carrying a `namespace` is flattened the same way.

Code mode. Codex declares its tools in an `additional_tools` input item (`{type, role:
"developer", tools: [...]}`) instead of top-level `tools`; every such item, wherever it stands in
`input` or in the stored history, declares tools exactly as top-level `tools` does.

Freeform (`custom`) tools take a raw string, not JSON arguments. Kiro only knows JSON tools, so
each is declared upstream as a tool with one string parameter, `input`, whose description is the
client's own: the tool's description, then its input format (for a grammar, its syntax and
definition, as the client declared them). The model's call comes back as a `custom_tool_call`
item carrying that string; a `custom_tool_call` / `custom_tool_call_output` pair in the input
goes upstream as that tool's use and result.

Built-in tools the client runs (`local_shell`, `shell` with a local environment, `apply_patch`)
are never hosted tools: `client_tools.py` declares each upstream as a JSON tool of its own name
and maps its `*_call` / `*_call_output` items both ways.

Compaction: a `compaction_trigger` item turns the request into the summarisation turn of
`compaction.py` (tools and reasoning off), answered with one `compaction` item; a kirod-sealed
`compaction` item in the input stands for the summary it holds.

Web search: a top-level `web_search` tool (also `web_search_preview`) is run by kirod inside the
turn through Kiro's MCP search (`kirod.upstream.websearch`) and shown as `web_search_call` items;
such items sent back in the input go upstream as text.

Other hosted tools (the tools a server would run: `file_search`, `code_interpreter`,
`image_generation`, `mcp`, …) cannot run behind Kiro. The rule: a hosted tool is dropped — named in
`dropped_tools` for the log line — when the request declares at least one function tool (plain
or namespaced) and `tool_choice` does not force a tool (forcing is rejected anyway); this is the
shape Codex always sends (`web_search` beside its function tools). A request whose only tools
are hosted gets a 400 naming the type, because dropping would leave it with no tools at all.

What cannot be honoured structurally is a 400, never approximated (DESIGN §1): forced
`tool_choice`, `text.format` json_object/json_schema, image URLs and file ids, file URLs, item
references, `background`, `conversation` and prompt templates. `input_file` parts with inline
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
    ToolSpec,
    ToolUseBlock,
    WebSearch,
)
from kirod.protocols.fields import (
    MAX_MESSAGES,
    MAX_TOOLS,
    BlockBudget,
    at_most,
    boolean_field,
    data_url_document,
    data_url_image,
    invalid,
    is_object,
    json_arguments,
    number_field,
    positive_integer,
    quoted,
    string_field,
    string_metadata,
    unsupported,
)
from kirod.protocols.fields import model_name as model_field
from kirod.protocols.responses.client_tools import (
    CALL_TYPES,
    CLIENT_TOOLS,
    OUTPUT_TYPES,
    runs_on_client,
)
from kirod.protocols.responses.compaction import ITEM_TYPES as COMPACTION_ITEMS
from kirod.protocols.responses.compaction import SUMMARY_INSTRUCTION
from kirod.protocols.responses.compaction import TRIGGER as COMPACTION_TRIGGER
from kirod.protocols.responses.encode import CUSTOM_INPUT, ResponseEcho, ToolNames
from kirod.protocols.responses.reasoning import ReasoningBox
from kirod.protocols.search import history_text

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
NAMESPACE_DELIMITER: Final = "__"

_EFFORTS: Final[Mapping[str, Effort]] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_SUMMARIES: Final = frozenset({"auto", "concise", "detailed"})
_TEXT_TYPES: Final = frozenset({"input_text", "output_text", "refusal"})
_EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}
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
    for name, message in _UNSUPPORTED_FIELDS.items():
        if body.get(name) not in (None, False):
            raise unsupported(name, message)
    model = model_field(body.get("model"))
    instructions = string_field(body, "instructions", "")
    tool_choice, choice_echo = _tool_choice(body.get("tool_choice"))
    reasoning, reasoning_echo, summary = _reasoning(body.get("reasoning"))
    _check_text(body.get("text"))
    metadata = string_metadata(body.get("metadata"))
    prompt_cache_key = string_field(body, "prompt_cache_key", "")
    previous_response_id = string_field(body, "previous_response_id", "")

    items = _normalize_input(body.get("input"), len(history))
    tools = _Tools(
        body.get("tools"),
        [
            *_additional_tools(history, "previous_response_id"),
            *_additional_tools(items, "input"),
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
        tool_choice=ToolChoice(ToolChoiceMode.NONE) if compacting else tool_choice,
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

    def __init__(self, box: ReasoningBox, flat_names: Mapping[tuple[str, str], str]) -> None:
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
            self._append(Role.ASSISTANT, [self._function_call(item, path)])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._append(Role.USER, [_function_call_output(item, path, self.budget)])
        elif kind == "custom_tool_call":
            self._append(Role.ASSISTANT, [self._custom_tool_call(item, path)])
        elif kind == "web_search_call":
            self._append(Role.ASSISTANT, [_search_history(item)])
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
        parts = _content_parts(
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

    def _function_call(self, item: Mapping[str, Any], path: str) -> ToolUseBlock:
        call_id, name, arguments = self._call(item, path, "arguments")
        return ToolUseBlock(call_id, name, json_arguments(arguments, f"{path}.arguments"))

    def _call(self, item: Mapping[str, Any], path: str, field: str) -> tuple[str, str, str]:
        """A tool call item's id, upstream (flattened) name, and its `field` string."""
        call_id = string_field(item, "call_id", path, required=True)
        name = string_field(item, "name", path, required=True)
        namespace = string_field(item, "namespace", path)
        value = string_field(item, field, path, required=True)
        assert call_id is not None
        assert name is not None
        assert value is not None
        if namespace is not None:
            name = self._flat_names.get((namespace, name)) or flat_tool_name(namespace, name)
        return call_id, name, value

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

    def _custom_tool_call(self, item: Mapping[str, Any], path: str) -> ToolUseBlock:
        call_id, name, text = self._call(item, path, "input")
        return ToolUseBlock(call_id, name, {CUSTOM_INPUT: text})

    def _reasoning(self, item: Mapping[str, Any], path: str) -> None:
        token = string_field(item, "encrypted_content", path)
        block = self._box.open_block(token) if token else None
        if block is None:
            self.dropped_reasoning += 1
        else:
            self._append(Role.ASSISTANT, [block])


def _content_parts(
    content: object, path: str, budget: BlockBudget, *, attachments: bool
) -> list[TextBlock | ImageBlock | DocumentBlock]:
    """Text parts (and images and files where `attachments`); empty texts are skipped."""
    if isinstance(content, str):
        budget.spend(1, path)
        return [TextBlock(content)] if content else []
    if not isinstance(content, list):
        raise invalid(path, "content must be a string or a list of content parts", "invalid_type")
    budget.spend(len(content), path)
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(content):
        if part.__class__ is dict:  # the usual part, a text, read before its path is made
            kind = part.get("type")
            if kind.__class__ is str and kind in _TEXT_TYPES:
                text = part.get("refusal" if kind == "refusal" else "text")
                if text.__class__ is str:
                    if text:
                        blocks.append(TextBlock(text))
                    continue
        part_path = f"{path}[{index}]"
        if not is_object(part):
            raise invalid(part_path, "each content part must be an object", "invalid_type")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise invalid(f"{part_path}.type", "must be a string", "invalid_type")
        if kind in _TEXT_TYPES:
            field = "refusal" if kind == "refusal" else "text"
            text = string_field(part, field, part_path, required=True)
            if text:
                blocks.append(TextBlock(text))
        elif kind == "input_image" and attachments:
            blocks.append(_image(part, part_path))
        elif kind == "input_file" and attachments:
            blocks.append(_file(part, part_path))
        else:
            raise invalid(
                f"{part_path}.type", f"content part type {quoted(kind)} is not allowed here"
            )
    return blocks


def _image(part: Mapping[str, Any], path: str) -> ImageBlock:
    if part.get("file_id") is not None:
        raise unsupported(
            f"{path}.file_id",
            "file ids are not supported; send the image inline as a base64 data URL",
        )
    url = string_field(part, "image_url", path, required=True)
    assert url is not None
    return data_url_image(url, f"{path}.image_url")


def _file(part: Mapping[str, Any], path: str) -> DocumentBlock:
    """An inline `file_data` data URL; `detail` is accepted and has no effect."""
    for key in ("file_id", "file_url"):
        if part.get(key) is not None:
            raise unsupported(
                f"{path}.{key}",
                "kirod cannot fetch files; send the file inline as file_data "
                "(data:application/pdf;base64,…) with a filename",
            )
    data = string_field(part, "file_data", path, required=True)
    assert data is not None
    return data_url_document(data, part.get("filename"), f"{path}.file_data", f"{path}.filename")


def _search_history(item: Mapping[str, Any]) -> TextBlock:
    """A web search of an earlier turn, as text: Kiro has no search items (`history_text`)."""
    action = item.get("action")
    action = action if isinstance(action, Mapping) else {}
    query = action.get("query")
    sources = action.get("sources")
    urls = [
        (source["url"], source["url"], "")
        for source in (sources if isinstance(sources, list) else [])[:100]
        if isinstance(source, Mapping) and isinstance(source.get("url"), str)
    ]
    return TextBlock(history_text(query if isinstance(query, str) else None, urls))


def _function_call_output(
    item: Mapping[str, Any], path: str, budget: BlockBudget
) -> ToolResultBlock:
    call_id = string_field(item, "call_id", path, required=True)
    assert call_id is not None
    output = item.get("output")
    if output is None:
        raise invalid(f"{path}.output", "is required", "missing_required_parameter")
    parts = _content_parts(output, f"{path}.output", budget, attachments=True)
    return ToolResultBlock(call_id, tuple(parts))


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


# -- tools -------------------------------------------------------------------------------------


def flat_tool_name(namespace: str, name: str) -> str:
    """The upstream name of function `name` in `namespace` (Codex's `canonical_flat_name`)."""
    return f"{namespace.rstrip('_')}{NAMESPACE_DELIMITER}{name.lstrip('_')}"


def _additional_tools(items: Sequence[Mapping[str, Any]], where: str) -> list[tuple[str, object]]:
    """The tool lists of the `additional_tools` items among `items`, with their paths."""
    found: list[tuple[str, object]] = []
    for index, item in enumerate(items):
        if is_object(item) and item.get("type") == "additional_tools":
            path = f"{where}[{index}].tools"
            tools = item.get("tools")
            if not isinstance(tools, list):
                raise invalid(path, "must be a list of tools", "invalid_type")
            found.append((path, tools))
    return found


class _Tools:
    """Function, custom and namespace tools, flattened; hosted tools dropped or refused by the
    rule. `additional` are the tool lists of `additional_tools` input items (code mode)."""

    def __init__(self, value: object, additional: Sequence[tuple[str, object]] = ()) -> None:
        self.specs: list[ToolSpec] = []
        self.echo: list[dict[str, Any]] = []
        self.names: dict[str, tuple[str, str]] = {}
        self.flat_names: dict[tuple[str, str], str] = {}
        self.custom: set[str] = set()
        self.client: set[str] = set()  # client-run built-in tools (client_tools.py)
        self.search: WebSearch | None = None  # the hosted web search, which kirod runs
        self._index: dict[str, int] = {}  # position of each name in `specs`
        self._redeclaring = False
        hosted: list[tuple[str, str]] = []
        if value is None:
            value = []
        if not isinstance(value, list):
            raise invalid("tools", "must be a list", "invalid_type")
        for where, tools in [("tools", value), *additional]:
            echo = self.echo if where == "tools" else []
            # A later additional_tools item may declare a tool again (a stored turn and the new
            # input both carry it; tools change mid-conversation): the last declaration wins.
            self._redeclaring = where != "tools"
            assert isinstance(tools, list)
            for index, tool in enumerate(tools):
                self._declare(tool, f"{where}[{index}]", echo, hosted, where)
        if self.search is not None and WebSearch.TOOL_NAME in self._index:
            raise invalid("tools", "a function named 'web_search' beside the web search tool")
        if hosted and not self.specs and self.search is None:
            where, kind = hosted[0]
            raise unsupported(
                where,
                f"tool type {quoted(kind)} is not supported: Kiro runs no hosted tools. Remove it "
                "(it is ignored when declared beside function tools)",
            )
        self.dropped = tuple(kind for _, kind in hosted)

    def _declare(
        self,
        tool: object,
        path: str,
        echo: list[dict[str, Any]],
        hosted: list[tuple[str, str]],
        where: str = "tools",
    ) -> None:
        if not is_object(tool):
            raise invalid(path, "each tool must be an object", "invalid_type")
        kind = string_field(tool, "type", path, required=True)
        if kind == "function":
            spec, echoed = _function_tool(tool, path)
            self._add(spec, path)
            echo.append(echoed)
        elif kind == "custom":
            spec, echoed = _custom_tool(tool, path)
            self._add(spec, path)
            self.custom.add(spec.name)
            echo.append(echoed)
        elif kind == "namespace":
            echo.append(self._namespace(tool, path, hosted))
        elif kind in _WEB_SEARCH_TYPES and where == "tools":
            if self.search is not None:
                raise invalid(f"{path}.type", "a web search tool is declared twice")
            self.search = _web_search(tool, path)
            echo.append(dict(tool))
        elif kind is not None and runs_on_client(tool):
            self._add(CLIENT_TOOLS[kind].spec, path)
            self.client.add(kind)
            echo.append(dict(tool))
        else:
            at_most(len(hosted) + 1, MAX_TOOLS, "tools", "tools")
            hosted.append((f"{path}.type", str(kind)[:64]))

    def _add(self, spec: ToolSpec, path: str) -> None:
        index = self._index.get(spec.name)
        if index is not None:
            if not self._redeclaring:
                raise invalid(f"{path}.name", f"tool name {quoted(spec.name)} is declared twice")
            self.specs[index] = spec
            return
        at_most(len(self.specs) + 1, MAX_TOOLS, "tools", "tools")
        self._index[spec.name] = len(self.specs)
        self.specs.append(spec)

    def _namespace(
        self, tool: Mapping[str, Any], path: str, hosted: list[tuple[str, str]]
    ) -> dict[str, Any]:
        namespace = string_field(tool, "name", path, required=True)
        assert namespace is not None
        description = string_field(tool, "description", path) or ""
        nested = tool.get("tools")
        if not isinstance(nested, list):
            raise invalid(f"{path}.tools", "must be a list of tools", "invalid_type")
        echoed = []
        for index, inner in enumerate(nested):
            inner_path = f"{path}.tools[{index}]"
            if not is_object(inner):
                raise invalid(inner_path, "each tool must be an object", "invalid_type")
            kind = string_field(inner, "type", inner_path, required=True)
            if kind == "function":
                spec, echo = _function_tool(inner, inner_path)
            elif kind == "custom":
                spec, echo = _custom_tool(inner, inner_path)
            else:
                at_most(len(hosted) + 1, MAX_TOOLS, "tools", "tools")
                hosted.append((f"{inner_path}.type", f"{namespace[:64]}.{str(kind)[:64]}"))
                continue
            flat = flat_tool_name(namespace, spec.name)
            self._add(ToolSpec(flat, _namespaced(description, spec), spec.input_schema), inner_path)
            if kind == "custom":
                self.custom.add(flat)
            self.names[flat] = (namespace, spec.name)
            self.flat_names[(namespace, spec.name)] = flat
            echoed.append(echo)
        return {"type": "namespace", "name": namespace, "description": description, "tools": echoed}


_WEB_SEARCH_TYPES: Final = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26"})


def _web_search(tool: Mapping[str, Any], path: str) -> WebSearch:
    """The hosted web search: `filters.allowed_domains` honoured; `user_location`,
    `search_context_size` and Codex's `external_web_access` accepted without effect."""
    filters = tool.get("filters")
    allowed: list[str] = []
    if isinstance(filters, Mapping) and isinstance(filters.get("allowed_domains"), list):
        for index, domain in enumerate(filters["allowed_domains"][:100]):
            if not isinstance(domain, str) or not domain:
                raise invalid(f"{path}.filters.allowed_domains[{index}]", "must be a domain")
            allowed.append(domain)
    return WebSearch(allowed_domains=tuple(allowed))


def _namespaced(namespace_description: str, spec: ToolSpec) -> str:
    """The namespace's description is the model's only context for its functions: keep it."""
    if not namespace_description:
        return spec.description
    return f"{namespace_description}\n\n{spec.description}".strip()


def _function_tool(tool: Mapping[str, Any], path: str) -> tuple[ToolSpec, dict[str, Any]]:
    """A function tool; `strict` is accepted but not enforced (the model sees the schema)."""
    name = string_field(tool, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    description = string_field(tool, "description", path) or ""
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = _EMPTY_SCHEMA
    elif not is_object(parameters):
        raise invalid(f"{path}.parameters", "must be a JSON schema object", "invalid_type")
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise invalid(f"{path}.strict", "must be a boolean", "invalid_type")
    echo = {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": dict(parameters),
        "strict": strict,
    }
    return ToolSpec(name, description, parameters), echo


def _custom_tool(tool: Mapping[str, Any], path: str) -> tuple[ToolSpec, dict[str, Any]]:
    """A freeform tool as Kiro can call it: one string parameter carrying the raw input."""
    name = string_field(tool, "name", path, required=True)
    if not name:
        raise invalid(f"{path}.name", "must be a non-empty string")
    description = string_field(tool, "description", path) or ""
    fmt = tool.get("format")
    if fmt is not None and not isinstance(fmt, Mapping):
        raise invalid(f"{path}.format", "must be an object", "invalid_type")
    schema = {
        "type": "object",
        "properties": {
            CUSTOM_INPUT: {"type": "string", "description": _input_format(fmt, f"{path}.format")}
        },
        "required": [CUSTOM_INPUT],
    }
    echo: dict[str, Any] = {"type": "custom", "name": name, "description": description}
    if fmt is not None:
        echo["format"] = dict(fmt)
    return ToolSpec(name, description, schema), echo


def _input_format(fmt: Mapping[str, Any] | None, path: str) -> str:
    """The client's declared input format, as the description of the one string parameter."""
    if fmt is None or fmt.get("type") in (None, "text"):
        return "The raw input text."
    if fmt.get("type") != "grammar":
        raise invalid(f"{path}.type", "must be 'text' or 'grammar'")
    syntax = string_field(fmt, "syntax", path) or "lark"
    definition = string_field(fmt, "definition", path, required=True)
    return f"The raw input text, in this {syntax} grammar:\n{definition}"


def _tool_choice(value: object) -> tuple[ToolChoice, str]:
    """auto and none are honoured; Kiro cannot force a tool, so forcing is a 400."""
    if value is None or value == "auto":
        return ToolChoice(ToolChoiceMode.AUTO), "auto"
    if value == "none":
        return ToolChoice(ToolChoiceMode.NONE), "none"
    if value == "required" or isinstance(value, Mapping):
        raise unsupported(
            "tool_choice",
            "forcing a tool call is not supported by Kiro; use tool_choice auto or none",
        )
    raise invalid("tool_choice", "must be 'auto', 'none', 'required' or a tool choice object")


# -- other fields ------------------------------------------------------------------------------


def _reasoning(value: object) -> tuple[Reasoning | None, dict[str, Any] | None, bool]:
    """`reasoning` → canonical Reasoning (None for effort `none`), its echo, summary wanted."""
    if value is None:
        return None, None, False
    if not isinstance(value, Mapping):
        raise invalid("reasoning", "must be an object", "invalid_type")
    effort = string_field(value, "effort", "reasoning")
    if effort is not None and effort != "none" and effort not in _EFFORTS:
        raise invalid(
            "reasoning.effort", "must be one of none, minimal, low, medium, high, xhigh, max"
        )
    summary = string_field(value, "summary", "reasoning")
    summary = summary or string_field(value, "generate_summary", "reasoning")
    if summary is not None and summary not in _SUMMARIES:
        raise invalid("reasoning.summary", "must be one of auto, concise, detailed")
    echo = {"effort": effort, "summary": summary}
    if effort == "none":
        return None, echo, False
    canonical = Reasoning(effort=_EFFORTS[effort] if effort else None, summary=summary)
    return canonical, echo, summary is not None


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

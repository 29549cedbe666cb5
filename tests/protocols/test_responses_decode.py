"""Responses request decoding: every accepted field, every rejection (with its param path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kirod.canonical.request import (
    ClientProtocol,
    ImageBlock,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.responses.decode import DecodedResponses, decode_responses
from kirod.protocols.responses.reasoning import ReasoningBox
from kirod.protocols.responses.tools import flat_tool_name
from tests.support import captures

BOX = ReasoningBox(bytes(range(32)))
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"  # the decoder passes image bytes through
SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}


def decode(
    body: object,
    headers: Mapping[str, str] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> DecodedResponses:
    return decode_responses(
        body, headers or {}, request_id="req_1", history=history, reasoning_box=BOX
    )


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "input": "hi", **fields}


def function(name: str, description: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description, **extra}


def user(*parts: dict[str, Any] | str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": p} if isinstance(p, str) else p for p in parts]
    return {"type": "message", "role": "user", "content": content}


def codex() -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of the pinned Codex's first `codex exec hello` request for a Claude
    model, from its committed capture (tests/clients/captures)."""
    recorded = captures.pinned_request("codex")
    return recorded.headers, recorded.body


def codex_request() -> dict[str, Any]:
    return codex()[1]


def texts(items: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(part["text"] for item in items for part in item["content"])


def test_string_input_and_defaults() -> None:
    decoded = decode(body())
    request = decoded.request
    assert request.protocol is ClientProtocol.OPENAI_RESPONSES
    assert request.request_id == "req_1"
    assert request.model == "claude-sonnet-4-5"
    assert request.messages == (Message(Role.USER, (TextBlock("hi"),)),)
    assert request.system == ()
    assert request.tools == ()
    assert request.tool_choice.mode is ToolChoiceMode.AUTO
    assert request.reasoning is None
    assert request.stream is False
    assert request.affinity_key is None
    assert decoded.store is True
    assert decoded.previous_response_id is None
    assert decoded.include_encrypted_reasoning is False
    assert decoded.reasoning_summary is False
    assert decoded.dropped_tools == ()
    assert decoded.input_items == (user("hi"),)
    assert decoded.echo.tool_choice == "auto"
    assert decoded.echo.parallel_tool_calls is True
    assert decoded.echo.truncation == "disabled"


def test_codex_request() -> None:
    headers, body = codex()
    # `prompt_cache_key` wins over the session header (they are equal as Codex sends them).
    decoded = decode(body, headers={**headers, "session-id": "header-session"})
    request = decoded.request
    developer = [item for item in body["input"] if item["role"] == "developer"]
    prompt = [item for item in body["input"] if item["role"] == "user"]
    assert len(developer) + len(prompt) == len(body["input"])
    assert request.system == texts(developer)
    assert request.messages == (Message(Role.USER, tuple(map(TextBlock, texts(prompt)))),)
    assert request.messages[0].content[-1] == TextBlock("hello")
    expected: list[str] = []
    namespaced: dict[str, tuple[str, str]] = {}
    for tool in body["tools"]:
        if tool["type"] == "function":
            expected.append(tool["name"])
        elif tool["type"] == "namespace":
            for inner in tool["tools"]:
                flat = f"{tool['name']}__{inner['name']}"
                expected.append(flat)
                namespaced[flat] = (tool["name"], inner["name"])
    assert [spec.name for spec in request.tools] == expected
    assert decoded.tool_names == namespaced
    (group,) = (tool for tool in body["tools"] if tool["type"] == "namespace")
    spawn_sent = next(inner for inner in group["tools"] if inner["name"] == "spawn_agent")
    spawn = request.tools[expected.index(f"{group['name']}__spawn_agent")]
    assert spawn.description == f"{group['description']}\n\n{spawn_sent['description']}"
    assert spawn.input_schema == spawn_sent["parameters"]
    assert decoded.dropped_tools == ()
    assert {"type": "web_search", "external_web_access": False} in body["tools"]
    assert request.web_search is not None  # run by kirod, inside the turn
    assert request.tool_choice.mode is ToolChoiceMode.AUTO
    assert request.reasoning == Reasoning(effort=None, summary="auto")
    assert request.stream is True
    assert request.affinity_key == body["prompt_cache_key"]
    assert decoded.store is False
    assert decoded.include_encrypted_reasoning is True
    assert decoded.reasoning_summary is True
    echo = decoded.echo
    assert echo.instructions is None
    assert echo.prompt_cache_key == body["prompt_cache_key"]
    assert [tool["type"] for tool in echo.tools] == [tool["type"] for tool in body["tools"]]
    assert echo.reasoning == {"effort": None, "summary": "auto"}


def test_codex_tool_turn_round_trip() -> None:
    """The tool-result turn resends everything: function_call and function_call_output items."""
    request = codex_request()
    sealed = BOX.seal("I should list files.", "sig-1")
    request["input"] += [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": sealed},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "tooluse_1",
            "name": "exec_command",
            "arguments": '{"cmd":"ls"}',
        },
        {
            "type": "function_call",
            "call_id": "tooluse_2",
            "name": "spawn_agent",
            "namespace": "multi_agent_v1",
            "arguments": "",
        },
        {"type": "function_call_output", "call_id": "tooluse_1", "output": "a.txt\nb.txt"},
        {
            "type": "function_call_output",
            "call_id": "tooluse_2",
            "output": [
                {"type": "input_text", "text": "spawned"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            ],
        },
    ]
    messages = decode(request).request.messages
    assert messages[1:] == (
        Message(
            Role.ASSISTANT,
            (
                ThinkingBlock("I should list files.", "sig-1"),
                ToolUseBlock("tooluse_1", "exec_command", {"cmd": "ls"}),
                ToolUseBlock("tooluse_2", "multi_agent_v1__spawn_agent", {}),
            ),
        ),
        Message(
            Role.USER,
            (
                ToolResultBlock("tooluse_1", (TextBlock("a.txt\nb.txt"),)),
                ToolResultBlock("tooluse_2", (TextBlock("spawned"), ImageBlock("image/png", PNG))),
            ),
        ),
    )


def test_roles_order_and_merging() -> None:
    decoded = decode(
        body(
            instructions="Be brief.",
            input=[
                {"role": "system", "content": "System text."},
                {"role": "user", "content": "one"},
                {"role": "developer", "content": [{"type": "input_text", "text": "Dev text."}]},
                {"role": "user", "content": "two"},
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "answer", "annotations": []},
                        {"type": "refusal", "refusal": "no more"},
                    ],
                },
                {"role": "assistant", "content": ""},
                {"role": "user", "content": [{"type": "input_text", "text": "three"}]},
            ],
        )
    )
    assert decoded.request.system == ("Be brief.", "System text.", "Dev text.")
    assert decoded.request.messages == (
        Message(Role.USER, (TextBlock("one"), TextBlock("two"))),
        Message(Role.ASSISTANT, (TextBlock("answer"), TextBlock("no more"))),
        Message(Role.USER, (TextBlock("three"),)),
    )
    assert decoded.echo.instructions == "Be brief."


def test_input_image_data_url() -> None:
    item = user("look", {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"})
    messages = decode(body(input=[item])).request.messages
    assert messages == (Message(Role.USER, (TextBlock("look"), ImageBlock("image/png", PNG))),)


def test_reasoning_replay_keeps_only_sealed_items() -> None:
    items = [
        user("q"),
        {"type": "reasoning", "summary": [], "encrypted_content": BOX.seal("kept", "s")},
        {"type": "reasoning", "summary": [], "encrypted_content": BOX.seal_redacted("blob")},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAAforeign"},
        {"type": "reasoning", "summary": [], "encrypted_content": BOX.seal("x", "s")[:-3]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "unsealed"}]},
        {
            "type": "reasoning",
            "summary": [],
            "encrypted_content": ReasoningBox(bytes(32)).seal("other install", "s"),
        },
        {"role": "assistant", "content": "done"},
    ]
    decoded = decode(body(input=items))
    assert decoded.request.messages[1] == Message(
        Role.ASSISTANT,
        (ThinkingBlock("kept", "s"), RedactedThinkingBlock("blob"), TextBlock("done")),
    )
    assert decoded.dropped_reasoning == 4


def test_history_comes_first_and_normalized_items_decode_again() -> None:
    first = decode(body(input="first question"))
    history = [
        *first.input_items,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "first answer"}],
        },
    ]
    second = decode(body(input="second", previous_response_id="resp_1"), history=history)
    assert second.previous_response_id == "resp_1"
    assert second.request.messages == (
        Message(Role.USER, (TextBlock("first question"),)),
        Message(Role.ASSISTANT, (TextBlock("first answer"),)),
        Message(Role.USER, (TextBlock("second"),)),
    )
    assert second.input_items == (user("second"),)
    assert decode(body(input=None), history=second.input_items).request.messages == (
        Message(Role.USER, (TextBlock("second"),)),
    )


def test_assistant_string_content_normalizes_to_output_text() -> None:
    decoded = decode(body(input=[{"role": "assistant", "content": "hi"}, user("q")]))
    assert decoded.input_items[0] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }


# -- tools ---------------------------------------------------------------------------------------


def test_function_tool() -> None:
    decoded = decode(body(tools=[function("run", "Runs", parameters=SCHEMA, strict=True)]))
    assert decoded.request.tools == (ToolSpec("run", "Runs", SCHEMA),)
    assert decoded.echo.tools == (
        {
            "type": "function",
            "name": "run",
            "description": "Runs",
            "parameters": SCHEMA,
            "strict": True,
        },
    )


def test_namespace_flattening_trims_delimiters_like_codex() -> None:
    assert flat_tool_name("mcp__calendar__", "__create_event") == "mcp__calendar__create_event"
    tools = [
        {
            "type": "namespace",
            "name": "crm_",
            "description": "",
            "tools": [function("_lookup", "Finds"), {"type": "web_search"}],
        }
    ]
    decoded = decode(body(tools=tools))
    assert decoded.request.tools == (
        ToolSpec("crm__lookup", "Finds", {"type": "object", "properties": {}}),
    )
    assert decoded.tool_names == {"crm__lookup": ("crm_", "_lookup")}
    assert decoded.dropped_tools == ("crm_.web_search",)


@pytest.mark.parametrize(
    "hosted",
    [
        "file_search",
        "code_interpreter",
        "computer_use_preview",
        "image_generation",
        "mcp",
    ],
)
def test_hosted_tools_dropped_beside_function_tools(hosted: str) -> None:
    decoded = decode(body(tools=[{"type": hosted}, function("run")]))
    assert [spec.name for spec in decoded.request.tools] == ["run"]
    assert decoded.dropped_tools == (hosted,)
    assert [tool["name"] for tool in decoded.echo.tools] == ["run"]


@pytest.mark.parametrize("builtin", ["local_shell", "shell", "apply_patch"])
def test_builtin_tools_the_client_runs_are_kept_alone_or_beside_others(builtin: str) -> None:
    decoded = decode(body(tools=[{"type": builtin}, function("run")]))
    assert [spec.name for spec in decoded.request.tools] == [builtin, "run"]
    assert decoded.dropped_tools == ()
    assert decoded.echo.client_tools == {builtin}
    assert [tool["type"] for tool in decode(body(tools=[{"type": builtin}])).echo.tools] == [
        builtin
    ]


@pytest.mark.parametrize("choice", [None, "auto", "none"])
def test_hosted_tools_alone_are_refused(choice: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        decode(body(tools=[{"type": "file_search"}], tool_choice=choice))
    assert caught.value.param == "tools[0].type"
    assert caught.value.code == "unsupported_capability"
    assert "'file_search'" in caught.value.message


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", ToolChoiceMode.AUTO), ("none", ToolChoiceMode.NONE)]
)
def test_tool_choice_honoured(choice: str, mode: ToolChoiceMode) -> None:
    decoded = decode(body(tools=[function("run")], tool_choice=choice))
    assert decoded.request.tool_choice.mode is mode
    assert decoded.echo.tool_choice == choice


# -- scalar fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effort", "canonical"),
    [
        ("minimal", "low"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "xhigh"),
        ("max", "max"),
    ],
)
def test_reasoning_effort(effort: str, canonical: str) -> None:
    decoded = decode(body(reasoning={"effort": effort, "summary": "detailed"}))
    assert decoded.request.reasoning == Reasoning(effort=canonical, summary="detailed")
    assert decoded.reasoning_summary is True
    assert decoded.echo.reasoning == {"effort": effort, "summary": "detailed"}


def test_reasoning_effort_none_disables_reasoning() -> None:
    decoded = decode(body(reasoning={"effort": "none", "summary": "auto"}))
    assert decoded.request.reasoning is None
    assert decoded.reasoning_summary is False


def test_reasoning_generate_summary_alias() -> None:
    decoded = decode(body(reasoning={"effort": "high", "generate_summary": "concise"}))
    assert decoded.request.reasoning == Reasoning(effort="high", summary="concise")


def test_accepted_fields() -> None:
    decoded = decode(
        body(
            max_output_tokens=1000,
            temperature=0.5,
            top_p=1,
            metadata={"kiro_session_id": "meta-session", "note": "x"},
            store=True,
            previous_response_id="resp_prev",
            parallel_tool_calls=False,
            truncation="auto",
            user="u-1",
            service_tier="auto",
            safety_identifier="s-1",
            prompt_cache_retention="24h",
            stream=True,
            stream_options={"include_obfuscation": False},
            text={"format": {"type": "text"}, "verbosity": "low"},
            include=["reasoning.encrypted_content", "message.output_text.logprobs"],
            background=False,
            top_logprobs=0,
            client_metadata={"x-codex-installation-id": "i"},
            some_future_field={"ignored": True},
        )
    )
    request, echo = decoded.request, decoded.echo
    assert request.max_output_tokens == 1000
    assert (request.sampling.temperature, request.sampling.top_p) == (0.5, 1.0)
    assert request.metadata == {"kiro_session_id": "meta-session", "note": "x"}
    assert request.affinity_key == "meta-session"
    assert request.stream is True
    assert decoded.include_encrypted_reasoning is True
    assert (echo.max_output_tokens, echo.temperature, echo.top_p) == (1000, 0.5, 1.0)
    assert echo.parallel_tool_calls is False
    assert echo.truncation == "auto"
    assert echo.user == "u-1"
    assert echo.previous_response_id == "resp_prev"
    assert echo.metadata == {"kiro_session_id": "meta-session", "note": "x"}


@pytest.mark.parametrize(
    ("fields", "headers", "key"),
    [
        (
            {"prompt_cache_key": "pck", "metadata": {"kiro_session_id": "m"}},
            {"session-id": "h"},
            "pck",
        ),
        (
            {"metadata": {"kiro_session_id": "m"}, "client_metadata": {"session_id": "c"}},
            {"session-id": "h"},
            "m",
        ),
        ({"client_metadata": {"session_id": "c", "thread_id": "t"}}, {"session-id": "h"}, "c"),
        ({"client_metadata": {"thread_id": "t"}}, {"session-id": "h"}, "t"),
        ({}, {"Session-ID": "h"}, "h"),
        ({}, {"session-id": "h", "x-session-affinity": "a"}, "h"),
        ({}, {"X-Session-Affinity": "a"}, "a"),
        ({}, {"x-client-request-id": "r"}, None),
    ],
)
def test_affinity_precedence(
    fields: dict[str, Any], headers: dict[str, str], key: str | None
) -> None:
    assert decode(body(**fields), headers=headers).request.affinity_key == key


# -- rejections ----------------------------------------------------------------------------------

IMAGE_URL = {"type": "input_image", "image_url": "https://example.com/cat.png"}
FILE_IMAGE = {"type": "input_image", "file_id": "file-1"}
CALL = {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"}
UNSUPPORTED = "unsupported_capability"
INVALID = "invalid_value"
TYPE = "invalid_type"
MISSING = "missing_required_parameter"

REJECTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("no-model", {"model": None}, "model", MISSING),
    ("model-type", {"model": 5}, "model", TYPE),
    ("input-type", {"input": 5}, "input", TYPE),
    ("empty-input", {"input": []}, "input", INVALID),
    ("only-system", {"input": [{"role": "system", "content": "s"}]}, "input", INVALID),
    ("item-type", {"input": ["hi"]}, "input[0]", TYPE),
    (
        "unknown-item",
        {"input": [{"type": "file_search_call", "id": "fs"}]},
        "input[0].type",
        INVALID,
    ),
    (
        "item-reference",
        {"input": [{"type": "item_reference", "id": "msg_1"}]},
        "input[0].type",
        UNSUPPORTED,
    ),
    ("no-role", {"input": [{"type": "message", "content": "x"}]}, "input[0].role", MISSING),
    ("bad-role", {"input": [{"role": "tool", "content": "x"}]}, "input[0].role", INVALID),
    ("content-type", {"input": [{"role": "user", "content": 5}]}, "input[0].content", TYPE),
    (
        "part-type",
        {"input": [user({"type": "input_audio", "input_audio": {}})]},
        "input[0].content[0].type",
        INVALID,
    ),
    ("part-not-object", {"input": [user("x") | {"content": ["x"]}]}, "input[0].content[0]", TYPE),
    (
        "text-missing",
        {"input": [user({"type": "input_text"})]},
        "input[0].content[0].text",
        MISSING,
    ),
    ("image-url", {"input": [user(IMAGE_URL)]}, "input[0].content[0].image_url", INVALID),
    ("image-file-id", {"input": [user(FILE_IMAGE)]}, "input[0].content[0].file_id", UNSUPPORTED),
    (
        "input-file-id",
        {"input": [user({"type": "input_file", "file_id": "f"})]},
        "input[0].content[0].file_id",
        UNSUPPORTED,
    ),
    (
        "input-file-url",
        {"input": [user({"type": "input_file", "file_url": "https://x/a.pdf"})]},
        "input[0].content[0].file_url",
        UNSUPPORTED,
    ),
    (
        "assistant-image",
        {
            "input": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
                    ],
                }
            ]
        },
        "input[0].content[0].type",
        INVALID,
    ),
    (
        "developer-image",
        {
            "input": [
                {
                    "role": "developer",
                    "content": [
                        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
                    ],
                }
            ]
        },
        "input[0].content[0].type",
        INVALID,
    ),
    ("call-id", {"input": [CALL | {"call_id": None}]}, "input[0].call_id", MISSING),
    ("call-name", {"input": [CALL | {"name": 3}]}, "input[0].name", TYPE),
    ("call-arguments", {"input": [CALL | {"arguments": "{nope"}]}, "input[0].arguments", INVALID),
    (
        "call-arguments-array",
        {"input": [CALL | {"arguments": "[1]"}]},
        "input[0].arguments",
        INVALID,
    ),
    (
        "call-arguments-object",
        {"input": [CALL | {"arguments": {"a": 1}}]},
        "input[0].arguments",
        TYPE,
    ),
    (
        "output-missing",
        {"input": [{"type": "function_call_output", "call_id": "c"}]},
        "input[0].output",
        MISSING,
    ),
    (
        "output-type",
        {"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
        "input[0].output",
        TYPE,
    ),
    ("tools-type", {"tools": {"a": 1}}, "tools", TYPE),
    ("tool-type", {"tools": [{"name": "x"}]}, "tools[0].type", MISSING),
    ("tool-name", {"tools": [{"type": "function"}]}, "tools[0].name", MISSING),
    ("tool-name-empty", {"tools": [function("")]}, "tools[0].name", INVALID),
    ("tool-parameters", {"tools": [function("a", parameters=[1])]}, "tools[0].parameters", TYPE),
    ("tool-strict", {"tools": [function("a", strict="yes")]}, "tools[0].strict", TYPE),
    ("tool-duplicate", {"tools": [function("a"), function("a")]}, "tools[1].name", INVALID),
    (
        "namespace-collision",
        {
            "tools": [
                function("ns__a"),
                {"type": "namespace", "name": "ns", "tools": [function("a")]},
            ]
        },
        "tools[1].tools[0].name",
        INVALID,
    ),
    ("namespace-tools", {"tools": [{"type": "namespace", "name": "ns"}]}, "tools[0].tools", TYPE),
    ("namespace-name", {"tools": [{"type": "namespace", "tools": []}]}, "tools[0].name", MISSING),
    ("hosted-only", {"tools": [{"type": "file_search"}]}, "tools[0].type", UNSUPPORTED),
    (
        "hosted-in-namespace-only",
        {"tools": [{"type": "namespace", "name": "n", "tools": [{"type": "mcp"}]}]},
        "tools[0].tools[0].type",
        UNSUPPORTED,
    ),
    ("choice-required", {"tool_choice": "required"}, "tool_choice", UNSUPPORTED),
    (
        "choice-function",
        {"tool_choice": {"type": "function", "name": "run"}},
        "tool_choice",
        UNSUPPORTED,
    ),
    ("choice-hosted", {"tool_choice": {"type": "web_search_preview"}}, "tool_choice", UNSUPPORTED),
    (
        "choice-allowed",
        {"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}},
        "tool_choice",
        UNSUPPORTED,
    ),
    ("choice-bogus", {"tool_choice": "sometimes"}, "tool_choice", INVALID),
    ("reasoning-type", {"reasoning": "high"}, "reasoning", TYPE),
    ("effort", {"reasoning": {"effort": "extreme"}}, "reasoning.effort", INVALID),
    ("summary", {"reasoning": {"summary": "verbose"}}, "reasoning.summary", INVALID),
    (
        "json-schema",
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
        "text.format",
        UNSUPPORTED,
    ),
    ("json-object", {"text": {"format": {"type": "json_object"}}}, "text.format", UNSUPPORTED),
    ("format-bogus", {"text": {"format": {"type": "yaml"}}}, "text.format.type", INVALID),
    ("text-type", {"text": "plain"}, "text", TYPE),
    ("include", {"include": "reasoning.encrypted_content"}, "include", TYPE),
    ("metadata-type", {"metadata": ["a"]}, "metadata", TYPE),
    ("metadata-value", {"metadata": {"k": 1}}, "metadata.k", TYPE),
    ("max-tokens-zero", {"max_output_tokens": 0}, "max_output_tokens", INVALID),
    ("max-tokens-string", {"max_output_tokens": "10"}, "max_output_tokens", TYPE),
    ("max-tokens-bool", {"max_output_tokens": True}, "max_output_tokens", TYPE),
    ("temperature", {"temperature": 2.5}, "temperature", INVALID),
    ("top-p", {"top_p": 1.5}, "top_p", INVALID),
    ("top-p-type", {"top_p": "1"}, "top_p", TYPE),
    ("store", {"store": "no"}, "store", TYPE),
    ("stream", {"stream": 1}, "stream", TYPE),
    ("parallel", {"parallel_tool_calls": "yes"}, "parallel_tool_calls", TYPE),
    ("instructions", {"instructions": ["x"]}, "instructions", TYPE),
    ("previous", {"previous_response_id": 5}, "previous_response_id", TYPE),
    ("background", {"background": True}, "background", UNSUPPORTED),
    ("conversation", {"conversation": "conv_1"}, "conversation", UNSUPPORTED),
    ("prompt", {"prompt": {"id": "pmpt_1"}}, "prompt", UNSUPPORTED),
]


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [pytest.param(fields, param, code, id=name) for name, fields, param, code in REJECTIONS],
)
def test_rejections(fields: dict[str, Any], param: str, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode(body(**fields))
    error = caught.value
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert (error.param, error.code) == (param, code)
    assert error.message.startswith(f"'{param}': ")


def test_body_must_be_an_object() -> None:
    with pytest.raises(ApiError) as caught:
        decode(["not", "an", "object"])
    assert caught.value.param is None
    assert caught.value.code == "invalid_type"


# -- code mode: additional_tools and freeform tools (Codex 0.171 with gpt-5.6-sol) ---------------

GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"}


def code_mode_tools() -> dict[str, Any]:
    return {
        "type": "additional_tools",
        "role": "developer",
        "tools": [
            {
                "type": "namespace",
                "name": "functions",
                "description": "",
                "tools": [
                    {"type": "custom", "name": "exec", "description": "Run JS", "format": GRAMMAR},
                    function("wait", "Wait"),
                ],
            },
            {"type": "custom", "name": "apply_patch", "description": "Patch files"},
        ],
    }


def test_additional_tools_declare_tools_and_freeform_ones_take_one_string() -> None:
    decoded = decode(body(input=[code_mode_tools(), user("hi")]))
    specs = {spec.name: spec for spec in decoded.request.tools}
    assert set(specs) == {"functions__exec", "functions__wait", "apply_patch"}
    schema = specs["functions__exec"].input_schema
    assert schema["required"] == ["input"]
    assert schema["properties"]["input"]["type"] == "string"
    assert "lark grammar:\nstart: /.+/s" in schema["properties"]["input"]["description"]
    assert specs["functions__exec"].description == "Run JS"
    assert decoded.echo.custom_tools == {"functions__exec", "apply_patch"}
    assert decoded.tool_names["functions__exec"] == ("functions", "exec")
    assert [m.role for m in decoded.request.messages] == [Role.USER]


def test_additional_tools_again_in_a_later_turn_are_not_a_duplicate() -> None:
    history = [code_mode_tools(), user("one")]
    decoded = decode(body(input=[code_mode_tools(), user("two")]), history=history)
    assert len(decoded.request.tools) == 3


def test_custom_tool_call_and_its_output_replay_as_tool_use_and_result() -> None:
    items = [
        code_mode_tools(),
        user("read it"),
        {
            "type": "custom_tool_call",
            "call_id": "call_1",
            "namespace": "functions",
            "name": "exec",
            "input": "text(1)",
        },
        {
            "type": "custom_tool_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "Script completed\n"},
                {"type": "input_text", "text": "file body"},
            ],
        },
    ]
    messages = decode(body(input=items)).request.messages
    assert messages[1] == Message(
        Role.ASSISTANT, (ToolUseBlock("call_1", "functions__exec", {"input": "text(1)"}),)
    )
    assert messages[2] == Message(
        Role.USER,
        (ToolResultBlock("call_1", (TextBlock("Script completed\n"), TextBlock("file body"))),),
    )


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "additional_tools", "tools": {}}, "input[0].tools"),
        (
            {"type": "additional_tools", "tools": [{"type": "custom", "name": "x", "format": 1}]},
            "input[0].tools[0].format",
        ),
        (
            {
                "type": "additional_tools",
                "tools": [{"type": "custom", "name": "x", "format": {"type": "regex"}}],
            },
            "input[0].tools[0].format.type",
        ),
        ({"type": "custom_tool_call", "call_id": "c", "name": "x"}, "input[0].input"),
    ],
)
def test_malformed_code_mode_items_name_the_field(item: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode(body(input=[item, user("hi")]))
    assert caught.value.param == param

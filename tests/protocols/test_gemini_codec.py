"""The Gemini codec: `generateContent` bodies → canonical, canonical events → Gemini chunks,
model names → kirod's, and each refusal's field."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kirod.canonical.assemble import CanonicalCompletion, SearchResultsBlock, ServerToolUseBlock
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    SearchHit,
    SearchResults,
    ServerToolUse,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.gemini_names import gemini_class, serving_name
from kirod.canonical.request import (
    ClientProtocol,
    DocumentBlock,
    ImageBlock,
    Message,
    Reasoning,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolChoiceMode,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.canonical.token_count import estimate_text_tokens
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.envelopes import Family, render
from kirod.protocols.gemini import (
    DecodedGemini,
    GeminiStreamEncoder,
    array_frame,
    compression_threshold,
    conversation_key,
    decode_count_tokens,
    decode_generate,
    generate_json,
)
from kirod.protocols.gemini.schema import json_schema

SIGNER = ThinkingSigner(b"0123456789abcdef0123456789abcdef")
USER = {"role": "user", "parts": [{"text": "hi"}]}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()
CLASSES = {"pro": "opus", "flash": "sonnet", "flash-lite": "haiku"}


def decode(**body: Any) -> DecodedGemini:
    return decode_generate(
        {"contents": [USER], **body}, model="opus", request_id="req_1", signer=SIGNER, stream=False
    )


def refused(**body: Any) -> ApiError:
    with pytest.raises(ApiError) as error:
        decode(**body)
    assert error.value.kind is ErrorKind.INVALID_REQUEST
    return error.value


# -- requests ------------------------------------------------------------------------------------


def test_a_plain_request_with_a_system_instruction_and_generation_config() -> None:
    decoded = decode(
        systemInstruction={"parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
        generationConfig={
            "maxOutputTokens": 256,
            "temperature": 1,
            "topP": 0.95,
            "topK": 64.0,  # google-genai types topK as a float
            "stopSequences": ["END"],
            "candidateCount": 1,
            "seed": 7,
            "responseMimeType": "text/plain",
        },
        safetySettings=[{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    )
    request = decoded.request
    assert request.protocol is ClientProtocol.GEMINI
    assert request.model == "opus"
    assert request.system == ("Be brief.", "Be kind.")
    assert request.messages == (Message(Role.USER, (TextBlock("hi"),)),)
    assert request.max_output_tokens == 256
    assert request.stop_sequences == ("END",)
    assert (request.sampling.temperature, request.sampling.top_p, request.sampling.top_k) == (
        1.0,
        0.95,
        64,
    )
    assert request.reasoning is None
    assert decoded.show_thoughts is False


def test_turns_of_one_role_merge_and_a_tool_round_trip_pairs_by_id_or_by_name() -> None:
    """Gemini CLI's router call sends two user turns in a row; the CLI sets its own call ids
    and echoes them; the API itself sets none, so an id-less response pairs by name."""
    request = decode(
        contents=[
            {"role": "user", "parts": [{"text": "Read a.txt"}]},
            {"parts": [{"text": "and b.txt"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Reading."},
                    {"functionCall": {"id": "cli-1", "name": "read_file", "args": {"p": "a"}}},
                    {"functionCall": {"name": "read_file", "args": {"p": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "read_file", "response": {"output": "B"}}},
                    {
                        "functionResponse": {
                            "id": "cli-1",
                            "name": "read_file",
                            "response": {"error": "no such file"},
                        }
                    },
                ],
            },
        ]
    ).request
    user, model, results = request.messages
    assert user == Message(Role.USER, (TextBlock("Read a.txt"), TextBlock("and b.txt")))
    assert model.content == (
        TextBlock("Reading."),
        ToolUseBlock("cli-1", "read_file", {"p": "a"}),
        ToolUseBlock("call_2_2", "read_file", {"p": "b"}),
    )
    assert results.content == (
        ToolResultBlock("call_2_2", (TextBlock("B"),)),
        ToolResultBlock("cli-1", (TextBlock("no such file"),), is_error=True),
    )


def test_a_model_turns_text_pieces_are_one_text() -> None:
    """google-genai's chat keeps a streamed answer as one content per chunk."""
    request = decode(
        contents=[
            USER,
            {"role": "model", "parts": [{"text": "First an"}]},
            {"role": "model", "parts": [{"text": "swer"}, {"text": "."}]},
            {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
        ]
    ).request
    assert request.messages[1:] == (
        Message(Role.ASSISTANT, (TextBlock("First answer."),)),
        Message(Role.USER, (TextBlock("a"), TextBlock("b"))),
    )


def test_a_response_of_another_shape_goes_as_json_and_may_carry_images() -> None:
    request = decode(
        contents=[
            USER,
            {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]},
            {
                "role": "function",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "shot",
                            "response": {"width": 2, "ok": True},
                            "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
                        }
                    }
                ],
            },
        ]
    ).request
    (result,) = request.messages[-1].content
    assert result == ToolResultBlock(
        "call_1_0",
        (TextBlock(json.dumps({"width": 2, "ok": True})), ImageBlock("image/png", PNG)),
    )


def test_a_response_to_no_call_is_refused() -> None:
    error = refused(
        contents=[{"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]}]
    )
    assert error.param == "contents[0].parts[0].functionResponse"


def test_inline_images_and_documents() -> None:
    pdf = base64.b64encode(b"%PDF-1.4 tiny").decode()
    request = decode(
        contents=[
            {
                "role": "user",
                "parts": [
                    {"text": "What are these?"},
                    {"inlineData": {"mimeType": "image/png", "data": PNG}},
                    {
                        "inlineData": {
                            "mimeType": "application/pdf",
                            "data": pdf,
                            "displayName": "a",
                        }
                    },
                ],
            }
        ]
    ).request
    assert request.messages[0].content[1:] == (
        ImageBlock("image/png", PNG),
        DocumentBlock("a", "pdf", pdf),
    )
    error = refused(
        contents=[{"parts": [{"inlineData": {"mimeType": "audio/mp3", "data": "AAAA"}}]}]
    )
    assert error.param == "contents[0].parts[0].inlineData.mimeType"
    error = refused(contents=[{"parts": [{"fileData": {"fileUri": "gs://b/x.pdf"}}]}])
    assert error.param == "contents[0].parts[0].fileData"
    assert "inlineData" in error.message


def test_function_declarations_in_both_schema_forms() -> None:
    request = decode(
        tools=[
            {
                "functionDeclarations": [
                    {
                        "name": "read_file",
                        "description": "Read a file",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {
                                "path": {"type": "STRING", "nullable": True},
                                "type": {"type": "STRING", "enum": ["a", "b"]},
                                "lines": {"type": "ARRAY", "items": {"type": "INTEGER"}},
                            },
                            "required": ["path"],
                        },
                    },
                    {
                        "name": "ls",
                        "parameters_json_schema": {"type": "object", "properties": {}},
                    },
                ]
            },
            {"functionDeclarations": [{"name": "now"}]},
        ]
    ).request
    read, ls, now = request.tools
    assert read.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": ["string", "null"]},
            "type": {"type": "string", "enum": ["a", "b"]},
            "lines": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["path"],
    }
    assert (ls.name, ls.input_schema) == ("ls", {"type": "object", "properties": {}})
    assert now.input_schema == {"type": "object", "properties": {}}
    error = refused(
        tools=[
            {"functionDeclarations": [{"name": "ls"}]},
            {"functionDeclarations": [{"name": "ls"}]},
        ]
    )
    assert "declared twice" in error.message


def test_a_schema_keeps_what_json_schema_shares() -> None:
    assert json_schema({"type": "STRING", "format": "date-time", "minLength": 1}) == {
        "type": "string",
        "format": "date-time",
        "minLength": 1,
    }
    assert json_schema({"anyOf": [{"type": "NUMBER"}, {"type": "NULL"}]}) == {
        "anyOf": [{"type": "number"}, {"type": "null"}]
    }


def test_tool_config_modes() -> None:
    def mode(value: str) -> ToolChoiceMode:
        config = {"functionCallingConfig": {"mode": value}}
        return decode(toolConfig=config).request.tool_choice.mode

    assert mode("AUTO") is ToolChoiceMode.AUTO
    assert mode("NONE") is ToolChoiceMode.NONE
    for forced in ("ANY", "VALIDATED"):
        with pytest.raises(ApiError) as error:
            mode(forced)
        assert error.value.code == "unsupported_capability"
        assert "AUTO or NONE" in error.value.message


def test_google_search_is_kirods_web_search_and_url_context_is_refused() -> None:
    request = decode(tools=[{"googleSearch": {}}]).request
    assert request.web_search is not None
    assert request.web_search.query is None
    assert request.tools == ()
    error = refused(tools=[{"urlContext": {}}])
    assert error.param == "tools[0].urlContext"
    assert "fetch" in error.message
    assert refused(tools=[{"codeExecution": {}}]).param == "tools[0].codeExecution"


@pytest.mark.parametrize(
    ("config", "param"),
    [
        (
            {"responseMimeType": "application/json", "responseJsonSchema": {"type": "OBJECT"}},
            "generationConfig.responseJsonSchema",
        ),
        ({"responseSchema": {"type": "OBJECT"}}, "generationConfig.responseSchema"),
        ({"responseMimeType": "application/json"}, "generationConfig.responseMimeType"),
        ({"candidateCount": 2}, "generationConfig.candidateCount"),
        ({"responseLogprobs": True}, "generationConfig.responseLogprobs"),
        ({"responseModalities": ["IMAGE"]}, "generationConfig.responseModalities"),
        ({"temperature": 3}, "generationConfig.temperature"),
        ({"maxOutputTokens": 0}, "generationConfig.maxOutputTokens"),
        ({"stopSequences": ["a"] * 6}, "generationConfig.stopSequences"),
        ({"thinkingConfig": {"thinkingLevel": "EXTREME"}}, "generationConfig.thinkingConfig"),
    ],
)
def test_what_cannot_be_honoured_is_a_400_naming_the_field(
    config: dict[str, Any], param: str
) -> None:
    error = refused(generationConfig=config)
    assert error.param is not None
    assert error.param.startswith(param)


def test_structured_output_is_refused_saying_why() -> None:
    """Gemini CLI's router call, as captured: a JSON answer in a schema with upper-case types."""
    error = refused(
        generationConfig={
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "OBJECT", "properties": {"model": {"type": "STRING"}}},
        }
    )
    assert "structured output is not supported" in error.message


@pytest.mark.parametrize(
    ("config", "reasoning", "shown"),
    [
        ({"includeThoughts": True}, Reasoning(), True),
        ({"includeThoughts": True, "thinkingLevel": "HIGH"}, Reasoning(effort="high"), True),
        ({"thinkingLevel": "LOW"}, Reasoning(effort="low"), False),
        ({"thinkingLevel": "MINIMAL", "includeThoughts": True}, Reasoning(effort="low"), True),
        ({"thinkingBudget": 2048, "includeThoughts": True}, Reasoning(budget_tokens=2048), True),
        ({"thinkingBudget": -1}, Reasoning(), False),
        ({"thinkingBudget": 0, "includeThoughts": True}, None, False),
        ({"includeThoughts": False}, None, False),
        ({}, None, False),
    ],
)
def test_thinking_config(config: dict[str, Any], reasoning: Reasoning | None, shown: bool) -> None:
    decoded = decode(generationConfig={"thinkingConfig": config})
    assert decoded.request.reasoning == reasoning
    assert decoded.show_thoughts is shown


def test_kirods_own_thoughts_are_replayed_and_others_dropped() -> None:
    signature = answer_signature("Let me think.", "upstream-sig")
    model_turn = {
        "role": "model",
        "parts": [
            {"text": "Let me ", "thought": True},
            {"text": "think.", "thought": True},
            {"text": "", "thought": True, "thoughtSignature": signature},
            {"text": "Done."},
        ],
    }
    request = decode(contents=[USER, model_turn, USER]).request
    assert request.messages[1].content == (
        ThinkingBlock("Let me think.", "upstream-sig"),
        TextBlock("Done."),
    )
    # Gemini CLI keeps only the signature; an edited text or a foreign signature is not replayed.
    for parts in (
        [{"thought": True, "thoughtSignature": signature}, {"text": "Done."}],
        [{"text": "Edited.", "thought": True, "thoughtSignature": signature}, {"text": "Done."}],
        [{"text": "Hm.", "thought": True, "thoughtSignature": "Zm9yZWlnbg=="}, {"text": "Done."}],
        [{"text": "Done.", "thoughtSignature": "not base64 at all!"}],
    ):
        turn = {"role": "model", "parts": parts}
        assert decode(contents=[USER, turn, USER]).request.messages[1].content == (
            TextBlock("Done."),
        )
    # A model turn of nothing but dropped thoughts does not split the user's turns around it.
    only_thought = {"role": "model", "parts": [{"thought": True, "thoughtSignature": signature}]}
    assert decode(contents=[USER, only_thought, USER]).request.messages == (
        Message(Role.USER, (TextBlock("hi"), TextBlock("hi"))),
    )


def answer_signature(thinking: str, upstream: str) -> str:
    """The signature kirod's answer gives this reasoning."""
    completion = CanonicalCompletion(
        "m", "x", (ThinkingBlock(thinking, upstream),), StopReason.END_TURN, None, Usage(1, 1)
    )
    answer = generate_json(
        completion, model="m", response_id="r", signer=SIGNER, show_thoughts=True
    )
    signature: str = answer["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    base64.urlsafe_b64decode(signature)  # bytes to the SDKs
    return signature


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"contents": []}, "contents"),
        ({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}, "contents[0].role"),
        ({"contents": [{"role": "user", "parts": "x"}]}, "contents[0].parts"),
        ({"contents": [USER], "cachedContent": "cachedContents/1"}, "cachedContent"),
        ({"contents": [USER], "systemInstruction": {"parts": [{"inlineData": {}}]}}, None),
    ],
)
def test_bad_bodies(body: dict[str, Any], param: str | None) -> None:
    with pytest.raises(ApiError) as error:
        decode_generate(body, model="m", request_id="r", signer=SIGNER, stream=False)
    assert error.value.status == 400
    if param is not None:
        assert error.value.param == param


def test_count_tokens_takes_contents_or_a_whole_request() -> None:
    alone = decode_count_tokens({"contents": [USER]}, model="m", request_id="r", signer=SIGNER)
    assert alone.messages == (Message(Role.USER, (TextBlock("hi"),)),)
    whole = decode_count_tokens(
        {
            "generateContentRequest": {
                "contents": [USER],
                "systemInstruction": {"parts": [{"text": "S"}]},
            }
        },
        model="m",
        request_id="r",
        signer=SIGNER,
    )
    assert whole.system == ("S",)


# -- model names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("gemini-3.1-pro-preview", "pro"),
        ("gemini-2.5-pro", "pro"),
        ("gemini-pro-latest", "pro"),
        ("gemini-3.5-flash-lite", "flash-lite"),
        ("gemini-flash-lite-latest", "flash-lite"),
        ("gemini-2.5-flash-lite-preview-06-17", "flash-lite"),
        ("gemini-3-flash-preview", "flash"),
        ("gemini-flash-latest", "flash"),
        ("models/gemini-2.5-flash", "flash"),
        ("gemini-embedding-001", None),
        ("claude-sonnet-4.5", None),
        ("gemini-professional", None),
    ],
)
def test_gemini_classes(name: str, kind: str | None) -> None:
    assert gemini_class(name) == kind


def test_serving_names() -> None:
    assert serving_name("gemini-3.1-pro-preview", CLASSES, {}) == "opus"
    assert serving_name("gemini-3.5-flash-lite", CLASSES, {}) == "haiku"
    assert serving_name("claude-sonnet-4.5", CLASSES, {}) == "claude-sonnet-4.5"
    # An exact alias wins (resolution applies it); a class the table lacks passes as is.
    aliases = {"gemini-3.1-pro-preview": "claude-sonnet-4.5"}
    assert serving_name("gemini-3.1-pro-preview", CLASSES, aliases) == "gemini-3.1-pro-preview"
    assert serving_name("gemini-2.5-flash", {"pro": "opus"}, {}) == "gemini-2.5-flash"


# -- answers -------------------------------------------------------------------------------------


def stream(
    events: list[CanonicalEvent], *, show: bool = True, frame: Any = None
) -> list[dict[str, Any]]:
    encoder = GeminiStreamEncoder(
        model="claude-opus-4-7",
        response_id="msg_1",
        request_id="req_1",
        signer=SIGNER,
        show_thoughts=show,
        **({"frame": frame} if frame else {}),
    )
    out = b"".join(chunk for event in events for chunk in encoder.feed(event)).decode()
    if frame is array_frame:
        return list(json.loads("[{}" + out + "]")[1:])
    assert json.loads(encoder.keepalive()[6:]) == {
        "candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "index": 0}],
        "modelVersion": "claude-opus-4-7",
        "responseId": "msg_1",
    }
    assert all(block.startswith("data: ") for block in out.split("\r\n\r\n")[:-1])
    return [json.loads(block[6:]) for block in out.split("\r\n\r\n") if block]


THINK_AND_CALL: list[CanonicalEvent] = [
    MessageStart("msg_1", "claude-opus-4.7", 40),
    BlockStart(0, BlockKind.THINKING),
    ThinkingDelta(0, "Need "),
    ThinkingDelta(0, "the file."),
    SignatureDelta(0, "sig"),
    BlockStop(0),
    BlockStart(1, BlockKind.TEXT),
    TextDelta(1, "Reading."),
    BlockStop(1),
    BlockStart(2, BlockKind.TOOL_USE, tool_use_id="tooluse_1", tool_name="read_file"),
    ToolInputDelta(2, '{"path": '),
    ToolInputDelta(2, '"a.txt"}'),
    BlockStop(2),
    Usage(40, 12, cache_read_tokens=30),
    MessageStop(StopReason.TOOL_USE),
]


def parts(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = chunk["candidates"][0]["content"]["parts"]
    return result


def test_a_stream_of_thoughts_text_and_a_call_ends_with_a_finish_reason() -> None:
    chunks = stream(THINK_AND_CALL)
    assert [parts(chunk) for chunk in chunks[:-1]] == [
        [{"text": "Need ", "thought": True}],
        [{"text": "the file.", "thought": True}],
        [
            {
                "text": "",
                "thought": True,
                "thoughtSignature": answer_signature("Need the file.", "sig"),
            }
        ],
        [{"text": "Reading."}],
        [{"functionCall": {"id": "tooluse_1", "name": "read_file", "args": {"path": "a.txt"}}}],
    ]
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    thoughts = estimate_text_tokens("Need the file.")  # Kiro reports no split
    assert last["usageMetadata"] == {
        "promptTokenCount": 40,
        "candidatesTokenCount": 12 - thoughts,
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": 52,
        "cachedContentTokenCount": 30,
    }
    assert {(c["modelVersion"], c["responseId"]) for c in chunks} == {("claude-opus-4-7", "msg_1")}
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])


def test_thoughts_are_hidden_without_include_thoughts_and_arrays_frame_the_same() -> None:
    hidden = stream(THINK_AND_CALL, show=False)
    assert not any(part.get("thought") for chunk in hidden for part in parts(chunk))
    assert stream(THINK_AND_CALL, frame=array_frame) == stream(THINK_AND_CALL)


def test_a_cut_answer_says_max_tokens_and_a_failure_ends_in_googles_error() -> None:
    cut = stream(
        [
            MessageStart("m", "x", 1),
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "Half"),
            BlockStop(0),
            MessageStop(StopReason.MAX_TOKENS),
        ]
    )
    assert cut[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    failed = stream(
        [
            MessageStart("m", "x", 1),
            BlockStart(0, BlockKind.TEXT),
            TextDelta(0, "Half"),
            ErrorEvent(ErrorKind.UPSTREAM, "Kiro cut the answer"),
            MessageStop(StopReason.END_TURN),
        ]
    )
    assert failed[-1] == {
        "error": {
            "code": 502,
            "message": "Kiro cut the answer",
            "status": "INTERNAL",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": "req_1"}
            ],
        }
    }
    assert len(failed) == 2  # nothing follows the error


def test_searches_become_grounding_metadata() -> None:
    hits = (SearchHit("https://example.com/a", "A"), SearchHit("https://example.com/b", ""))
    events: list[CanonicalEvent] = [
        MessageStart("m", "x", 1),
        ServerToolUse(0, "srv_1", "web_search", "aiohttp 4"),
        SearchResults(1, "srv_1", hits),
        BlockStart(2, BlockKind.TEXT),
        TextDelta(2, "It is out."),
        BlockStop(2),
        MessageStop(StopReason.END_TURN),
    ]
    grounding = {
        "webSearchQueries": ["aiohttp 4"],
        "groundingChunks": [
            {"web": {"uri": "https://example.com/a", "title": "A"}},
            {"web": {"uri": "https://example.com/b", "title": "https://example.com/b"}},
        ],
    }
    assert stream(events)[-1]["candidates"][0]["groundingMetadata"] == grounding
    completion = CanonicalCompletion(
        "m",
        "x",
        (
            ServerToolUseBlock("srv_1", "web_search", "aiohttp 4"),
            SearchResultsBlock("srv_1", hits),
            TextBlock("It is out."),
        ),
        StopReason.END_TURN,
        None,
        Usage(3, 4),
    )
    whole = generate_json(
        completion, model="m", response_id="r", signer=SIGNER, show_thoughts=False
    )
    (candidate,) = whole["candidates"]
    assert candidate["groundingMetadata"] == grounding
    assert candidate["content"] == {"role": "model", "parts": [{"text": "It is out."}]}
    assert candidate["finishReason"] == "STOP"
    assert whole["usageMetadata"]["totalTokenCount"] == 7


def test_errors_render_in_googles_envelope() -> None:
    body = render(Family.GEMINI, ApiError(ErrorKind.AUTHENTICATION, "invalid API key"), "req_9")
    assert body["error"]["code"] == 401
    assert body["error"]["status"] == "UNAUTHENTICATED"
    assert body["error"]["details"][0]["requestId"] == "req_9"


def test_snake_case_spellings_are_read_as_google_reads_them() -> None:
    """google-genai 3.6.1 writes some nested fields in the proto's snake_case."""
    decoded = decode(
        contents=[
            {"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": PNG}}]}
        ],
        generation_config={"thinking_config": {"include_thoughts": True}, "max_output_tokens": 9},
        tools=[{"function_declarations": [{"name": "f", "parameters_json_schema": {}}]}],
        tool_config={"function_calling_config": {"mode": "NONE"}},
    )
    request = decoded.request
    assert request.messages[0].content == (ImageBlock("image/png", PNG),)
    assert decoded.show_thoughts is True
    assert request.reasoning == Reasoning()
    assert request.max_output_tokens == 9
    assert [tool.name for tool in request.tools] == ["f"]
    assert request.tool_choice.mode is ToolChoiceMode.NONE
    error = refused(tools=[{"url_context": {}}])
    assert error.param == "tools[0].url_context"


def session_turn(prompt: str) -> dict[str, Any]:
    context = "<session_context>\nThis is the Gemini CLI.\n</session_context>"
    return {"role": "user", "parts": [{"text": context}, {"text": prompt}]}


def test_gemini_clis_first_turn_keys_its_conversation() -> None:
    """Gemini CLI names no session over the Gemini API; the digest of its first turn (session
    context and first prompt) is the same in every later call, and differs for another
    session's first prompt; a request that does not start with a session context has none."""
    first = session_turn("What does notes.txt say?")
    call = {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {}}}]}
    key = conversation_key({"contents": [first]})
    assert key is not None
    assert key.startswith("gemini-cli:")
    assert conversation_key({"contents": [first, call, {"role": "user", "parts": []}]}) == key
    assert conversation_key({"contents": [session_turn("hello")]}) != key
    assert conversation_key({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}) is None
    assert conversation_key({"contents": []}) is None
    assert conversation_key([first]) is None


def test_the_compression_threshold_compresses_by_four_fifths_of_the_served_window() -> None:
    """Gemini CLI measures against 1,048,576 tokens for every model."""
    assert compression_threshold(200_000) == 0.15  # 157,286 tokens: 79 % of 200,000
    assert compression_threshold(128_000) == 0.09
    assert compression_threshold(1_000_000) == 0.5  # never later than Gemini CLI's own


def test_a_prompt_too_long_says_what_a_gemini_cli_user_can_do() -> None:
    """Gemini CLI never compresses on an error, so the message says how to."""
    error = ApiError(
        ErrorKind.INVALID_REQUEST, "prompt is too long", code="context_length_exceeded"
    )
    body = render(Family.GEMINI, error, "req_1")["error"]
    assert body["status"] == "INVALID_ARGUMENT"
    assert body["message"].startswith("prompt is too long; in Gemini CLI run /compress")
    assert "model.compressionThreshold" in body["message"]
    anthropic = render(Family.ANTHROPIC, error, "req_1")["error"]
    assert anthropic["message"] == "prompt is too long"  # Claude Code parses its own form

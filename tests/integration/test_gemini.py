"""The Gemini API end to end: the official `google-genai` Python SDK, and raw requests where the
SDK cannot go (no key, a key in the URL, the JSON-array stream), against the real daemon and the
fake Kiro."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from PIL import Image

from kirod.localapi.client import trace_path
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.support.kiro_env import import_account, start_daemon
from tests.support.raw_http import send

ON = {"KIROD_ENABLE_GEMINI_API": "true"}
PRO = "gemini-3.1-pro-preview"  # Gemini CLI's default model
FLASH_LITE = "gemini-3.5-flash-lite"  # its side calls' model
SONNET = "claude-sonnet-4.6"
READ_FILE = types.FunctionDeclaration(
    name="read_file",
    description="Read a file",
    parameters_json_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    proc = start_daemon(module_tmp, fake, ON)
    import_account(proc, fake.fake.issue_social_account())
    try:
        yield proc
    finally:
        proc.kill()


def sdk(proc: DaemonProcess, api_version: str | None = "v1beta") -> genai.Client:
    options = types.HttpOptions(base_url=proc.base_url, api_version=api_version)
    return genai.Client(api_key=proc.api_key, http_options=options)


@pytest.fixture
def client(daemon: DaemonProcess) -> genai.Client:
    return sdk(daemon)


def chats(service: FakeKiro) -> list[dict[str, Any]]:
    return [request.json["conversationState"] for request in service.requests("chat")]


def model_id(state: Mapping[str, Any]) -> str:
    model: str = state["currentMessage"]["userInputMessage"]["modelId"]
    return model


def goog(proc: DaemonProcess) -> dict[str, str]:
    return {"x-goog-api-key": proc.api_key, "Content-Type": "application/json"}


HI = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()


# -- generateContent -----------------------------------------------------------------------------


def test_a_gemini_name_is_served_by_its_class_and_shown_as_the_model_version(
    client: genai.Client, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    answer = client.models.generate_content(
        model=PRO,
        contents="hi",
        config=types.GenerateContentConfig(
            system_instruction="Be brief.",
            max_output_tokens=256,
            temperature=1,
            top_p=0.95,
            top_k=64,
        ),
    )
    assert answer.text == "Hello from Kiro."
    assert answer.candidates is not None
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.model_version == "claude-opus-5-5"  # the newest Opus the fake lists
    usage = answer.usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count or 0) > 0
    assert (usage.candidates_token_count or 0) > 0
    assert usage.total_token_count == (usage.prompt_token_count or 0) + (
        usage.candidates_token_count or 0
    )
    (state,) = chats(service)
    assert model_id(state) == "claude-opus-5.5"
    assert "Be brief." in json.dumps(state)


def test_the_trace_shows_the_gemini_name_and_the_kiro_model_that_served_it(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    """The request keeps the name Gemini CLI sent (model resolution serves its class), so
    `kiroctl trace` shows it beside the Kiro model; the answer's `modelVersion` is that model's
    public id."""
    service.enqueue(Reply(text="Hello from Kiro."))
    answer = send(daemon, "POST", f"/v1beta/models/{PRO}:generateContent", goog(daemon), HI)
    assert answer.status == 200, answer.body
    assert answer.json()["modelVersion"] == "claude-opus-5-5"
    (row,) = daemon.client.request("GET", trace_path(last=1))["requests"]
    assert row["model"] == PRO
    assert [attempt["model"] for attempt in row["attempts"]] == ["claude-opus-5.5"]


def test_side_call_names_and_kiro_ids(client: genai.Client, service: FakeKiro) -> None:
    service.enqueue(Reply(text="one"), Reply(text="two"))
    client.models.generate_content(model=FLASH_LITE, contents="hi")
    answer = client.models.generate_content(model=SONNET, contents="hi")  # `-m <kiro id>`
    assert answer.model_version == SONNET
    assert [model_id(state) for state in chats(service)] == ["claude-haiku-4.5", SONNET]


def test_a_streamed_tool_round_trip_with_thinking(client: genai.Client, service: FakeKiro) -> None:
    """Gemini CLI's turn: thinking asked only as `includeThoughts`, its own call ids echoed back
    in the function response, the thought text left out of the history."""
    service.enqueue(
        Reply(
            text="Reading it.",
            thinking="The user wants the file.",
            tool_calls=(ToolCall("read_file", {"path": "notes.txt"}),),
        ),
        Reply(text="The note is about a canary."),
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[READ_FILE])],
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        automatic_function_calling=NO_AFC,
    )
    question = types.Content(role="user", parts=[types.Part(text="What does notes.txt say?")])
    chunks = list(
        client.models.generate_content_stream(model=PRO, contents=[question], config=config)
    )
    parts = [part for chunk in chunks for part in chunk.candidates[0].content.parts or ()]  # type: ignore[index, union-attr]
    thoughts = [part for part in parts if part.thought]
    assert "".join(part.text or "" for part in thoughts) == "The user wants the file."
    assert thoughts[-1].thought_signature
    assert "".join(p.text or "" for p in parts if not p.thought) == "Reading it."
    calls = [part.function_call for part in parts if part.function_call]
    assert [(call.name, call.args) for call in calls] == [("read_file", {"path": "notes.txt"})]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]

    (call,) = calls
    assert call.id
    history = types.Content(
        role="model",
        parts=[
            types.Part(thought=True, thought_signature=thoughts[-1].thought_signature),
            types.Part(text="Reading it."),
            types.Part(function_call=call),
        ],
    )
    result = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name="read_file", response={"output": "A canary sings."}
                )
            )
        ],
    )
    second = list(
        client.models.generate_content_stream(
            model=PRO, contents=[question, history, result], config=config
        )
    )
    assert "".join(chunk.text or "" for chunk in second) == "The note is about a canary."

    first_state, second_state = chats(service)
    asked = second_state["history"][-1]["assistantResponseMessage"]
    (tool_use,) = asked["toolUses"]
    assert "reasoningContent" not in asked  # the client kept the signature, not the thought
    context = second_state["currentMessage"]["userInputMessage"]["userInputMessageContext"]
    (tool_result,) = context["toolResults"]
    assert tool_result["toolUseId"] == tool_use["toolUseId"] == call.id
    assert "A canary sings." in json.dumps(tool_result["content"])
    specs = context["tools"]
    assert [spec["toolSpecification"]["name"] for spec in specs] == ["read_file"]
    assert first_state["conversationId"]


def test_thoughts_sent_back_whole_are_replayed_upstream(
    client: genai.Client, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="Four.", thinking="Two and two."), Reply(text="Yes."))
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
    )
    first = client.models.generate_content(model=PRO, contents="2+2?", config=config)
    assert first.candidates is not None
    model_turn = first.candidates[0].content
    assert model_turn is not None
    assert [(p.thought, p.text) for p in model_turn.parts or ()] == [
        (True, "Two and two."),
        (None, "Four."),
    ]
    client.models.generate_content(
        model=PRO,
        contents=[
            types.Content(role="user", parts=[types.Part(text="2+2?")]),
            model_turn,
            types.Content(role="user", parts=[types.Part(text="Sure?")]),
        ],
        config=config,
    )
    replayed = chats(service)[-1]["history"][-1]["assistantResponseMessage"]
    assert "reasoningContent" in replayed  # signed reasoning, not text
    assert "Two and two." in json.dumps(replayed["reasoningContent"])


def test_an_image_goes_upstream(client: genai.Client, service: FakeKiro) -> None:
    picture = io.BytesIO()
    Image.new("RGB", (2, 2), "red").save(picture, format="PNG")
    service.enqueue(Reply(text="A red square."))
    answer = client.models.generate_content(
        model=PRO,
        contents=[
            types.Part.from_bytes(data=picture.getvalue(), mime_type="image/png"),
            "What is this?",
        ],
    )
    assert answer.text == "A red square."
    current = chats(service)[-1]["currentMessage"]["userInputMessage"]
    assert [image["format"] for image in current["images"]] == ["png"]


def test_google_search_answers_with_grounding_metadata(
    client: genai.Client, service: FakeKiro
) -> None:
    """Gemini CLI's google_web_search side call: `googleSearch` alone, on a flash model."""
    service.enqueue(
        Reply(tool_calls=(ToolCall("web_search", {"query": "aiohttp 4"}),)),
        Reply(text="aiohttp 4 is out."),
    )
    answer = client.models.generate_content(
        model="gemini-3-flash-preview",
        contents="What is new in aiohttp?",
        config=types.GenerateContentConfig(tools=[types.Tool(google_search=types.GoogleSearch())]),
    )
    assert answer.text == "aiohttp 4 is out."
    assert answer.candidates is not None
    grounding = answer.candidates[0].grounding_metadata
    assert grounding is not None
    assert grounding.web_search_queries == ["aiohttp 4"]
    chunks = grounding.grounding_chunks or []
    assert chunks
    assert chunks[0].web is not None
    assert chunks[0].web.uri == "https://example.com/aiohttp-4/1"
    assert chunks[0].web.title == "Result 1 for aiohttp 4"
    assert service.requests("mcp")


def test_the_sdk_given_only_a_base_url_calls_v1(daemon: DaemonProcess, service: FakeKiro) -> None:
    service.enqueue(Reply(text="Over v1."))
    # A client closes its connections once dropped: each is held while it is used.
    base_url_only, v1 = sdk(daemon, api_version=None), sdk(daemon, api_version="v1")
    answer = base_url_only.models.generate_content(model=PRO, contents="hi")
    assert answer.text == "Over v1."
    tokens = v1.models.count_tokens(model=PRO, contents="hi")
    assert (tokens.total_tokens or 0) > 0
    log = daemon.log()
    for method in ("generateContent", "countTokens"):
        assert f"path=/v1/models/{PRO}:{method} status=200" in log


def test_the_json_array_stream_without_alt_sse(daemon: DaemonProcess, service: FakeKiro) -> None:
    service.enqueue(Reply(text="In an array."))
    answer = send(daemon, "POST", f"/v1beta/models/{PRO}:streamGenerateContent", goog(daemon), HI)
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("application/json")
    chunks = answer.json()
    text = "".join(
        part.get("text", "")
        for chunk in chunks
        for part in (chunk.get("candidates") or [{}])[0].get("content", {}).get("parts", [])
    )
    assert text == "In an array."
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


# -- countTokens and models ----------------------------------------------------------------------


def test_count_tokens(client: genai.Client, service: FakeKiro) -> None:
    short = client.models.count_tokens(model=PRO, contents="hi")
    long = client.models.count_tokens(model=PRO, contents="hi " * 2000)
    assert 0 < (short.total_tokens or 0) < (long.total_tokens or 0)
    assert service.requests("chat") == []


def test_models_list_and_get(client: genai.Client, daemon: DaemonProcess) -> None:
    listed = list(client.models.list())
    v1 = send(daemon, "GET", "/v1/models", {"Authorization": f"Bearer {daemon.api_key}"}).json()
    assert [model.name for model in listed] == [f"models/{row['id']}" for row in v1["data"]]
    pro = client.models.get(model=PRO)
    assert pro.name == f"models/{PRO}"
    assert pro.display_name == "Claude Opus 5.5"
    assert (pro.input_token_limit or 0) > (pro.output_token_limit or 0) > 0
    assert "generateContent" in (pro.supported_actions or [])
    with pytest.raises(errors.ClientError) as missing:
        client.models.get(model="no-such-model")
    assert (missing.value.code, missing.value.status) == (404, "NOT_FOUND")


# -- errors --------------------------------------------------------------------------------------


def test_refusals_are_400s_in_googles_envelope(client: genai.Client, service: FakeKiro) -> None:
    with pytest.raises(errors.ClientError) as structured:
        client.models.generate_content(
            model=FLASH_LITE,
            contents="Pick a model",
            config=types.GenerateContentConfig(
                response_mime_type="application/json",
                response_json_schema={
                    "type": "OBJECT",
                    "properties": {"model": {"type": "STRING"}},
                },
            ),
        )
    assert (structured.value.code, structured.value.status) == (400, "INVALID_ARGUMENT")
    assert "structured output is not supported" in (structured.value.message or "")
    with pytest.raises(errors.ClientError) as url_context:
        client.models.generate_content(
            model=PRO,
            contents="Read https://example.com",
            config=types.GenerateContentConfig(tools=[types.Tool(url_context=types.UrlContext())]),
        )
    assert "kirod fetches no URLs" in (url_context.value.message or "")
    with pytest.raises(errors.ClientError) as forced:
        client.models.generate_content(
            model=PRO,
            contents="x",
            config=types.GenerateContentConfig(
                tools=[types.Tool(function_declarations=[READ_FILE])],
                tool_config=types.ToolConfig(
                    function_calling_config=types.FunctionCallingConfig(
                        mode=types.FunctionCallingConfigMode.ANY
                    )
                ),
                automatic_function_calling=NO_AFC,
            ),
        )
    assert forced.value.code == 400
    assert service.requests("chat") == []


def test_keys_come_from_headers_never_from_the_url(daemon: DaemonProcess) -> None:
    path = f"/v1beta/models/{PRO}:countTokens"
    bearer = {"Authorization": f"Bearer {daemon.api_key}", "Content-Type": "application/json"}
    assert send(daemon, "POST", path, goog(daemon), HI).status == 200
    assert send(daemon, "POST", path, bearer, HI).status == 200
    in_url = send(daemon, "POST", f"{path}?key={daemon.api_key}", {}, HI)
    assert in_url.status == 401
    error = in_url.json()["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    assert "x-goog-api-key" in error["message"]
    assert "not read" in error["message"]
    assert error["details"][0]["requestId"] == in_url.headers["x-request-id"]
    wrong = send(daemon, "POST", path, {"x-goog-api-key": "wrong"}, HI)
    assert wrong.status == 401
    assert wrong.json()["error"]["message"] == "invalid API key"


def test_unknown_methods_and_models_are_404s(daemon: DaemonProcess) -> None:
    method = send(daemon, "POST", f"/v1beta/models/{PRO}:embedContent", goog(daemon), HI)
    assert method.status == 404
    assert "generateContent" in method.json()["error"]["message"]
    model = send(daemon, "POST", "/v1beta/models/llama3:generateContent", goog(daemon), HI)
    assert model.status == 404
    assert model.json()["error"]["status"] == "NOT_FOUND"
    doubled = send(daemon, "POST", f"/v1beta/v1beta/models/{PRO}:generateContent", goog(daemon), HI)
    assert doubled.status == 404
    assert "GOOGLE_GEMINI_BASE_URL takes none" in doubled.json()["error"]["message"]
    # kirod's own lookup keeps GET /v1/models/{id}, in OpenAI's envelope.
    own = send(daemon, "GET", "/v1/models/claude-sonnet-4-6", goog(daemon))
    assert (own.status, own.json()["id"]) == (200, "claude-sonnet-4-6")


def test_the_gemini_api_is_off_by_default(fake: ThreadedFake, short_tmp: Path) -> None:
    proc = start_daemon(short_tmp, fake)
    try:
        for path in ("/v1beta/models", f"/v1beta/models/{PRO}:generateContent"):
            answer = send(proc, "POST" if ":" in path else "GET", path, {}, HI)
            assert answer.status == 404
            assert "enable_gemini_api = true" in answer.json()["error"]["message"]
        v1 = send(proc, "POST", f"/v1/models/{PRO}:generateContent", goog(proc), HI)
        assert v1.status == 404
        assert "enable_gemini_api" in v1.json()["error"]["message"]
        off_client = sdk(proc)
        with pytest.raises(errors.ClientError) as off:
            off_client.models.generate_content(model=PRO, contents="hi")
        assert off.value.code == 404
    finally:
        proc.kill()


# -- cut and failed answers ----------------------------------------------------------------------

CUT_TEXT = (
    "Step 1 is done. Step 2 is done. Now step 3: I will edit the file and then run the tests."
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_cut_answer_ends_at_max_tokens_never_stop(
    client: genai.Client, service: FakeKiro, stream: bool
) -> None:
    """Kiro ends without its tail frames: the client is told the output ran out, so that it
    goes on rather than take half the work for done."""
    service.enqueue(
        Script(reply=Reply(text=CUT_TEXT), fault=Fault.CUT_GENERATION, fault_at=4, chunk_size=8)
    )
    if stream:
        chunks = list(client.models.generate_content_stream(model=PRO, contents="Do it."))
        text = "".join(chunk.text or "" for chunk in chunks)
        last = chunks[-1]
    else:
        last = client.models.generate_content(model=PRO, contents="Do it.")
        text = last.text or ""
    assert text == CUT_TEXT[:32]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert len(service.requests("chat")) == 1


def test_a_stream_that_fails_midway_ends_in_an_error_the_sdk_raises(
    client: genai.Client, service: FakeKiro
) -> None:
    service.enqueue(
        Script(reply=Reply(text=CUT_TEXT), fault=Fault.CONNECTION_CUT, fault_at=3, chunk_size=8)
    )
    seen: list[str] = []

    def read_all() -> None:
        for chunk in client.models.generate_content_stream(model=PRO, contents="Do it."):
            seen.append(chunk.text or "")

    with pytest.raises(errors.APIError) as failed:
        read_all()
    assert failed.value.code is not None
    assert failed.value.code >= 500
    assert failed.value.status in ("INTERNAL", "UNAVAILABLE")
    assert "".join(seen)  # the part streamed before the failure
    assert CUT_TEXT.startswith("".join(seen))


def test_a_prompt_too_long_is_a_400_in_googles_envelope(
    client: genai.Client, service: FakeKiro
) -> None:
    service.enqueue(Script(fault=Fault.CONTEXT_WINDOW_EXCEEDED))
    with pytest.raises(errors.ClientError) as too_long:
        client.models.generate_content(model=PRO, contents="A very long prompt.")
    assert (too_long.value.code, too_long.value.status) == (400, "INVALID_ARGUMENT")
    assert too_long.value.message


def test_the_sdks_chat_keeps_each_streamed_turn(client: genai.Client, service: FakeKiro) -> None:
    """Its chat drops a turn whose stream held an invalid chunk: every chunk kirod sends,
    the last with its finish reason, is one it keeps (docs/CLIENTS.md §4.4)."""
    service.enqueue(Reply(text="First answer."), Reply(text="Second answer."))
    chat = client.chats.create(model=PRO)
    first = "".join(chunk.text or "" for chunk in chat.send_message_stream("One?"))
    second = "".join(chunk.text or "" for chunk in chat.send_message_stream("Two?"))
    assert (first, second) == ("First answer.", "Second answer.")
    history = chats(service)[-1]["history"]
    assert "One?" in json.dumps(history)
    assert "First answer." in json.dumps(history)


def test_the_sdks_chat_replays_streamed_thoughts_kept_chunk_by_chunk(
    client: genai.Client, service: FakeKiro
) -> None:
    """The chat keeps a streamed reasoning as one content per chunk, its signature on the
    last: pieced together again, it is kirod's own and goes back upstream."""
    service.enqueue(
        Script(reply=Reply(text="Four.", thinking="Two and two make four."), chunk_size=5),
        Reply(text="Yes."),
    )
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True)
    )
    chat = client.chats.create(model=PRO, config=config)
    first = list(chat.send_message_stream("2+2?"))
    thoughts = [
        part
        for chunk in first
        for part in (chunk.candidates[0].content.parts or [])  # type: ignore[index, union-attr]
        if part.thought
    ]
    assert len(thoughts) > 2  # streamed in pieces
    list(chat.send_message_stream("Sure?"))
    replayed = chats(service)[-1]["history"][-1]["assistantResponseMessage"]
    assert "Two and two make four." in json.dumps(replayed["reasoningContent"])


def test_the_sdks_automatic_function_calling_runs_a_python_tool(
    client: genai.Client, service: FakeKiro
) -> None:
    """google-genai calls the Python function the model asks for and sends its result back
    on its own (`{"result": …}`), the way most SDK users meet tools."""
    opened: list[str] = []

    def read_file(path: str) -> str:
        """Read a file."""
        opened.append(path)
        return "A canary sings."

    service.enqueue(
        Reply(tool_calls=(ToolCall("read_file", {"path": "notes.txt"}),)),
        Reply(text="It is about a canary."),
    )
    answer = client.models.generate_content(
        model=PRO,
        contents="What does notes.txt say?",
        config=types.GenerateContentConfig(tools=[read_file]),
    )
    assert answer.text == "It is about a canary."
    assert opened == ["notes.txt"]
    second = chats(service)[-1]
    (result,) = second["currentMessage"]["userInputMessage"]["userInputMessageContext"][
        "toolResults"
    ]
    assert json.loads(result["content"][0]["text"]) == {"result": "A canary sings."}
    (use,) = second["history"][-1]["assistantResponseMessage"]["toolUses"]
    assert result["toolUseId"] == use["toolUseId"]


def test_a_scoped_key_is_held_to_the_model_that_serves(
    daemon: DaemonProcess, service: FakeKiro
) -> None:
    """A key limited to Haiku may use flash-lite (Haiku serves it), not pro (Opus does); the
    model list shows it only what it may use."""
    answer = daemon.client.request("POST", "/keys", {"name": "haiku-only", "models": ["*haiku*"]})
    assert isinstance(answer, dict)
    options = types.HttpOptions(base_url=daemon.base_url, api_version="v1beta")
    scoped = genai.Client(api_key=answer["secret"], http_options=options)
    with pytest.raises(errors.ClientError) as refused:
        scoped.models.generate_content(model=PRO, contents="hi")
    assert (refused.value.code, refused.value.status) == (403, "PERMISSION_DENIED")
    assert "claude-opus-5-5" in (refused.value.message or "")
    with pytest.raises(errors.ClientError) as uncounted:
        scoped.models.count_tokens(model=PRO, contents="hi")
    assert uncounted.value.code == 403
    service.enqueue(Reply(text="From Haiku."))
    assert scoped.models.generate_content(model=FLASH_LITE, contents="hi").text == "From Haiku."
    assert [model.name for model in scoped.models.list()] == ["models/claude-haiku-4-5"]

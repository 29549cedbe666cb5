"""The committed captures (`captures/<client>-<version>-<variant>.json`, written by `python -m
tests.clients.capture --client NAME`) name their pinned client and what it ran, hold no
secret or local detail, and show what the client tests and the guide rely on: the one request
a prompt makes, the session id kirod reads, the file-read tool the tests call.

No client needed (but for the last test, which captures llm again): these read only files in
the tree.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.clients import (
    agents_env,
    aider_env,
    capture,
    cc_env,
    claude_sdk_env,
    cline_env,
    codex_env,
    continue_env,
    copilot_env,
    gemini_cli_env,
    install,
    kilo_env,
    llm_env,
    opencode_env,
    pi_env,
    recorder,
)
from tests.clients.capture import CODEX_MODELS, DEFAULT
from tests.clients.capture_diff import differences
from tests.clients.recorder import (
    BASE_URL_PLACEHOLDER,
    DEVICE_PLACEHOLDER,
    HOME_PLACEHOLDER,
    OPENCODE_SESSION_PLACEHOLDER,
    SESSION_PLACEHOLDER,
    WORKDIR_PLACEHOLDER,
)

CAPTURES = [
    pytest.param(client, variant, id=client if variant == DEFAULT else f"{client}-{variant}")
    for client, variant in capture.every_capture()
]
COMMANDS = {
    cc_env.CLIENT: ["claude", "-p", "hello", "--output-format", "json"],
    codex_env.CLIENT: ["codex", "exec", "--skip-git-repo-check", "hello"],
    opencode_env.CLIENT: ["opencode", "run", "--format", "json", "hello"],
    kilo_env.CLIENT: kilo_env.command(capture.PROMPT),
    cline_env.CLIENT: cline_env.command(capture.CLINE_PROMPT, Path(HOME_PLACEHOLDER)),
    continue_env.CLIENT: continue_env.command(capture.PROMPT, f"{HOME_PLACEHOLDER}/kirod.yaml"),
    copilot_env.CLIENT: ["copilot", "-p", "hello"],
    aider_env.CLIENT: aider_env.command(capture.PROMPT),
    llm_env.CLIENT: llm_env.command(capture.PROMPT),
    gemini_cli_env.CLIENT: ["gemini", "-p", "hello", "--yolo", "--output-format", "json"],
    pi_env.CLIENT: pi_env.command(capture.PROMPT),
    agents_env.CLIENT: ["python", "agent.py"],
    claude_sdk_env.CLIENT: ["python", "agent.py"],
}
"""What each client was run with: what its tests run (pi: over Messages; see `command`)."""
PATHS = {
    cc_env.CLIENT: "/v1/messages?beta=true",
    codex_env.CLIENT: "/v1/responses",
    agents_env.CLIENT: "/v1/responses",
    claude_sdk_env.CLIENT: "/v1/messages?beta=true",
    "openai-responses": "/v1/responses",
}
"""Where each client (or pi's variant) sends its requests, if not `/v1/messages`."""
USER_AGENTS = {
    cc_env.CLIENT: "claude-cli/{version} .+",
    codex_env.CLIENT: "codex_exec/{version} .+",
    opencode_env.CLIENT: "opencode/{version} .+",
    kilo_env.CLIENT: "Kilo-Code/{version} .+",
    cline_env.CLIENT: "ai-sdk/anthropic/.+",
    continue_env.CLIENT: "node-fetch",
    copilot_env.CLIENT: "Anthropic/JS .+",
    aider_env.CLIENT: "litellm/.+",
    llm_env.CLIENT: "Anthropic/Python .+",
    gemini_cli_env.CLIENT: "GeminiCLI-tui/{version}/.+",
    pi_env.CLIENT: "(Anthropic|OpenAI)/JS .+",
    agents_env.CLIENT: "Agents/Python {version}",
    claude_sdk_env.CLIENT: r"claude-cli/\S+ \(external, sdk-py, agent-sdk/{version}\)",
}
UNSTREAMED = {agents_env.CLIENT}
"""The clients whose calls are not streamed."""
HEADERS = {copilot_env.CLIENT: {"x-initiator": "user"}}
"""Headers of their own that the clients must send."""
MODELS = {
    kilo_env.CLIENT: kilo_env.MODEL,
    cline_env.CLIENT: cline_env.MODEL,
    continue_env.CLIENT: continue_env.MODEL,
    copilot_env.CLIENT: copilot_env.MODEL,
    aider_env.CLIENT: aider_env.MODEL,
    llm_env.CLIENT: llm_env.MODEL,
}
"""The clients whose prompt makes one request, and the model the guide gives them."""
ID_PLACEHOLDERS = {
    cc_env.CLIENT: {SESSION_PLACEHOLDER, DEVICE_PLACEHOLDER},
    claude_sdk_env.CLIENT: {SESSION_PLACEHOLDER, DEVICE_PLACEHOLDER},
    copilot_env.CLIENT: {SESSION_PLACEHOLDER},  # its session's folder, in the system prompt
    opencode_env.CLIENT: {OPENCODE_SESSION_PLACEHOLDER},
    kilo_env.CLIENT: {OPENCODE_SESSION_PLACEHOLDER},
    pi_env.CLIENT: {SESSION_PLACEHOLDER},  # over Responses
}
"""The id placeholders a capture may hold (Codex's are named in it); none for the others."""
SESSION_HEADERS = {
    opencode_env.CLIENT: {"x-session-affinity", "x-session-id", "x-opencode-session-id"},
    kilo_env.CLIENT: {"x-session-affinity", "x-session-id"},
    "openai-responses": {"session_id"},
}
"""The headers naming the session, of the clients (or pi's variant) that send one."""
READ_TOOLS = {
    kilo_env.CLIENT: "read",
    gemini_cli_env.CLIENT: gemini_cli_env.READ_TOOL,
    cline_env.CLIENT: "read_files",
    continue_env.CLIENT: continue_env.READ_TOOL,
    copilot_env.CLIENT: copilot_env.READ_TOOL,
}
MACHINE_DETAILS = {
    aider_env.CLIENT: r"Platform: (?!<platform>)|Current date: (?!<date>)",
    llm_env.CLIENT: r"Platform: (?!<platform>)|Current date: (?!<date>)",
    kilo_env.CLIENT: r"Today's date: (?!<date>)|Message time: (?!<date>)|\d\. Date: (?!<date>)",
    cline_env.CLIENT: r"Today's date: (?!<date>)|Message time: (?!<date>)|\d\. Date: (?!<date>)",
    gemini_cli_env.CLIENT: r"Today's date is (?!<date>)",
}
"""What the captures of these clients must hold only as placeholders: the machine, the day."""


def command(client: str, variant: str) -> list[str]:
    """What the client was run with for the capture `variant`."""
    if client == pi_env.CLIENT:
        return pi_env.command(capture.PROMPT, pi_env.PROVIDERS[variant])
    return COMMANDS[client]


def committed(client: str, variant: str = DEFAULT) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(capture.pinned_output(client, variant).read_text())
    return document


def test_every_pinned_client_is_captured() -> None:
    assert list(capture.RECIPES) == list(install.TESTED_CLIENTS)
    assert set(COMMANDS) == set(USER_AGENTS) == set(install.TESTED_CLIENTS)


@pytest.mark.parametrize(("client", "variant"), CAPTURES)
def test_the_capture_names_its_pinned_client_and_command(client: str, variant: str) -> None:
    document = committed(client, variant)
    pin = install.pin(client)
    assert document["client"] == client
    assert document["version"] == pin.version
    plugins = [f"{name}=={version}" for name, version in document.get("plugins", {}).items()]
    assert plugins == list(pin.plugins)
    assert document["command"] == command(client, variant)


MESSAGES_OR_RESPONSES = [param for param in CAPTURES if param.values[0] != gemini_cli_env.CLIENT]


@pytest.mark.parametrize(("client", "variant"), MESSAGES_OR_RESPONSES)
def test_every_request_is_a_streamed_post_from_the_client(client: str, variant: str) -> None:
    document = committed(client, variant)
    agent = USER_AGENTS[client].format(version=re.escape(document["version"]))
    assert document["requests"]
    for request in document["requests"]:
        path = PATHS.get(variant, PATHS.get(client, "/v1/messages"))
        assert (request["method"], request["path"]) == ("POST", path)
        assert re.fullmatch(agent, request["headers"]["user-agent"]), request["headers"]
        assert HEADERS.get(client, {}).items() <= request["headers"].items()
        assert request["body"].get("stream", False) is (client not in UNSTREAMED)


@pytest.mark.parametrize("client", MODELS)
def test_a_prompt_is_one_request_for_the_readmes_model(client: str) -> None:
    (request,) = committed(client)["requests"]
    assert request["body"]["model"] == MODELS[client]
    assert request["body"]["messages"][-1]["role"] == "user"


@pytest.mark.parametrize(("client", "variant"), CAPTURES)
def test_the_capture_holds_no_secret_or_local_detail(client: str, variant: str) -> None:
    document = committed(client, variant)
    text = json.dumps(document)
    for request in document["requests"]:
        assert not set(request["headers"]) & recorder.SECRET_HEADERS
        assert not set(request["headers"]) & recorder.VARIABLE_HEADERS
    assert recorder.TOKEN not in text
    home, workdir = re.escape(HOME_PLACEHOLDER), re.escape(WORKDIR_PLACEHOLDER)
    local = re.sub(rf"(?:{home}|{workdir})[\w/.-]*", "", text)  # paths under the placeholders
    assert not re.search(r"/tmp/|/home/|/work/|kd-|127\.0\.0\.1:\d", local)
    if client != codex_env.CLIENT:  # Codex names its agents `/root`, `/root/task1`, …
        assert not re.search(r"/root\b", local)
    ids = {
        *re.findall(recorder.UUID, text),
        *re.findall(r"\b[0-9a-f]{32,}\b", text),
        *re.findall(r"\bses_\w+", text),
    }
    assert ids <= ID_PLACEHOLDERS.get(client, set()) | set(document.get("placeholders", {}))


@pytest.mark.parametrize("client", MACHINE_DETAILS)
def test_the_machine_and_the_day_are_placeholders(client: str) -> None:
    assert not re.search(MACHINE_DETAILS[client], json.dumps(committed(client)))


@pytest.mark.parametrize(
    ("client", "variant"),
    [
        (client, variant)
        for client, variant in capture.every_capture()
        if client not in (cc_env.CLIENT, codex_env.CLIENT, claude_sdk_env.CLIENT)
    ],
)
def test_the_session_id_kirod_reads(client: str, variant: str) -> None:
    """opencode and Kilo name their session in `x-session-affinity`, which kirod reads to keep
    a session's turns on one Kiro conversation, and pi over Responses in `session_id` (and
    `prompt_cache_key`, which kirod reads first); the others send nothing kirod could keep a
    conversation on one account by: no id header, no `metadata` (see the guide's "How
    requests use your accounts")."""
    names = SESSION_HEADERS.get(variant, SESSION_HEADERS.get(client, ()))
    placeholder = SESSION_PLACEHOLDER if client == pi_env.CLIENT else OPENCODE_SESSION_PLACEHOLDER
    expected = dict.fromkeys(names, placeholder)
    for request in committed(client, variant)["requests"]:
        headers = request["headers"]
        named = {
            name: headers[name]
            for name in headers
            if re.search("session|affinity|conversation|thread", name)
        }
        assert named == expected
        assert "metadata" not in request["body"]


@pytest.mark.parametrize("client", READ_TOOLS)
def test_the_file_read_tool_the_tests_call_is_declared(client: str) -> None:
    (request,) = committed(client)["requests"]
    tools = request["body"]["tools"]
    if client == gemini_cli_env.CLIENT:
        tools = [d for tool in tools for d in tool.get("functionDeclarations", [])]
    assert READ_TOOLS[client] in {tool["name"] for tool in tools}


def test_gemini_cli_with_the_guides_model_makes_one_streamed_call() -> None:
    """The guide names `model.name`: no router call, one `streamGenerateContent?alt=sse` of that
    model with `x-goog-api-key`, asking for thoughts with `includeThoughts` alone, declaring its
    tools (web search among them) in one `functionDeclarations` tool, and no session id."""
    document = committed(gemini_cli_env.CLIENT)
    model = document["settings_json"]["model"]["name"]
    assert document["settings_json"] == gemini_cli_env.guide_settings()
    (request,) = document["requests"]
    assert request["path"] == f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
    assert request["headers"]["x-goog-api-key"] == "<token>"
    config = request["body"]["generationConfig"]
    assert config["thinkingConfig"] == {"includeThoughts": True}
    (tool,) = request["body"]["tools"]
    names = {declaration["name"] for declaration in tool["functionDeclarations"]}
    assert {gemini_cli_env.READ_TOOL, gemini_cli_env.SEARCH_TOOL} <= names


def test_gemini_cli_without_a_model_routes_first_and_falls_back_at_once() -> None:
    """No `model.name`: a router side call to flash-lite asking for JSON in a schema, which a
    400 (here the capture server's) makes Gemini CLI give up at once, without a retry, and go on
    with its default model at `thinkingLevel: HIGH`."""
    document = committed(gemini_cli_env.CLIENT, capture.GEMINI_NO_MODEL)
    router, main = document["requests"]
    assert router["path"] == f"/v1beta/models/{gemini_cli_env.ROUTER_MODEL}:generateContent"
    config = router["body"]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["type"] == "OBJECT"
    assert [content["role"] for content in router["body"]["contents"]][-2:] == ["user", "user"]
    assert main["path"] == (
        f"/v1beta/models/{gemini_cli_env.DEFAULT_MODEL}:streamGenerateContent?alt=sse"
    )
    assert main["body"]["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "HIGH"


def test_the_settings_are_the_drivers() -> None:
    """What each client was run with is what its tests give it, from the guide."""
    opencode = committed(opencode_env.CLIENT)["opencode_json"]
    assert opencode["provider"]["kirod"]["npm"] == opencode_env.ANTHROPIC
    assert "provider: anthropic" in committed(continue_env.CLIENT)["config_yaml"]
    copilot = committed(copilot_env.CLIENT)["environment"]
    assert copilot["COPILOT_PROVIDER_TYPE"] == copilot_env.ANTHROPIC
    kilo = committed(kilo_env.CLIENT)
    assert kilo["kilo_json"] == kilo_env.config(BASE_URL_PLACEHOLDER)
    assert kilo_env.OFFLINE.items() <= kilo["environment"].items()
    cline = committed(cline_env.CLIENT)
    assert cline["providers_json"] == cline_env.providers(BASE_URL_PLACEHOLDER, "<token>")
    assert cline["global_settings_json"] == cline_env.GLOBAL_SETTINGS


def test_under_the_claude_agent_sdk_claude_code_asks_for_thinking_updates() -> None:
    """What kirod must accept (docs/CLIENTS.md §5.4): `display: "updates"` under its beta; the
    capture server's 400 made Claude Code send the turn again, then without `display`."""
    requests = committed(claude_sdk_env.CLIENT)["requests"]
    first = requests[0]
    assert first["body"]["thinking"] == {"type": "adaptive", "display": "updates"}
    assert "thinking-display-updates-2026-08-18" in first["headers"]["anthropic-beta"].split(",")
    assert first["body"]["messages"] == requests[1]["body"]["messages"]
    assert requests[2]["body"]["thinking"] == {"type": "adaptive"}
    assert "x-claude-code-session-id" in first["headers"]


def test_the_agents_sdk_sends_one_unstreamed_turn_with_its_instructions() -> None:
    (request,) = committed(agents_env.CLIENT)["requests"]
    body = request["body"]
    assert body["model"] == agents_env.MODEL
    assert body["include"] == []
    assert body["instructions"] == "Answer briefly."
    assert body["input"] == [{"content": "hello", "role": "user"}]
    assert "store" not in body
    assert "previous_response_id" not in body


def test_what_pi_sends_over_each_api() -> None:
    """pi 0.73.1 with the guide's models.json: over Messages its tools carry
    `eager_input_streaming` and it asks for no thinking; over Responses its system prompt is a
    `role: system` input item, `store` is false, and its session id is the `prompt_cache_key`
    and the `session_id` header. Both declare `read`, the tool the tests call."""
    messages = committed(pi_env.CLIENT, "anthropic-messages")
    assert messages["models_json"] == pi_env.models_json(BASE_URL_PLACEHOLDER)
    (request,) = messages["requests"]
    body = request["body"]
    assert body["model"] == pi_env.MODEL
    assert "thinking" not in body
    assert {tool["eager_input_streaming"] for tool in body["tools"]} == {True}
    assert pi_env.READ_TOOL in {tool["name"] for tool in body["tools"]}
    (request,) = committed(pi_env.CLIENT, "openai-responses")["requests"]
    body = request["body"]
    assert body["input"][0]["role"] == "system"
    assert body["store"] is False
    assert body["prompt_cache_key"] == request["headers"]["session_id"] == SESSION_PLACEHOLDER
    assert pi_env.READ_TOOL in {tool["name"] for tool in body["tools"]}


@pytest.mark.parametrize("model", CODEX_MODELS)
def test_the_codex_capture_is_of_its_model(model: str) -> None:
    document = committed(codex_env.CLIENT, model)
    assert document["model"] == model
    assert f'model = "{model}"' in document["config_toml"]
    body = document["requests"][0]["body"]
    assert body["model"] == model
    if model == codex_env.CODE_MODE_MODEL:  # code mode: tools only in an `additional_tools` item
        assert "tools" not in body
        assert body["input"][0]["type"] == "additional_tools"
    else:
        assert "exec_command" in {tool.get("name") for tool in body["tools"]}


@pytest.mark.parametrize("model", CODEX_MODELS)
def test_each_codex_id_has_a_named_placeholder(model: str) -> None:
    document = committed(codex_env.CLIENT, model)
    ids = set(re.findall(recorder.UUID, json.dumps(document)))
    assert ids == set(document["placeholders"]), ids ^ set(document["placeholders"])
    assert SESSION_PLACEHOLDER in ids
    assert document["placeholders"][recorder.id_placeholder(2)] == "installation_id"
    metadata = json.loads(document["requests"][0]["headers"]["x-codex-turn-metadata"])
    assert metadata["turn_started_at_unix_ms"] == 0


def test_the_machine_placeholders() -> None:
    info = "- Platform: Linux-6.1-x86_64-with-glibc2.36\n- Current date: 2026-12-05"
    assert recorder.scrub({"system": [{"text": info}]}, capture.PLATFORM_AND_DATE) == {
        "system": [{"text": "- Platform: <platform>\n- Current date: <date>"}]
    }


def test_the_date_placeholders() -> None:
    prompt = "Today's date: Sat Dec 05 2026\nMessage time: 2026-12-05T19:04:08Z\n2. Date: 12/5/2026"
    assert recorder.scrub({"system": [prompt]}, capture.PROMPT_DATES) == {
        "system": ["Today's date: <date>\nMessage time: <date>\n2. Date: <date>"]
    }


def test_differences_name_what_a_new_version_changed() -> None:
    old = committed(cc_env.CLIENT)
    new = copy.deepcopy(old)
    request = new["requests"][0]
    request["headers"]["anthropic-beta"] += ",brand-new-2027-01-01"
    request["body"]["brand_new_field"] = True
    request["body"]["messages"].append(
        {"role": "developer", "content": [{"type": "hologram", "data": "…"}]}
    )
    request["body"]["tools"].append({"name": "Teleport", "input_schema": {}, "eager": True})
    request["body"]["model"] = "claude-opus-6"
    new["requests"].append(copy.deepcopy(request))
    lines = differences(old, new)
    assert f"requests per run: {len(old['requests'])} → {len(new['requests'])}" in lines
    assert "new anthropic-beta values: brand-new-2027-01-01" in lines
    assert "new body fields: brand_new_field" in lines
    assert "new message roles: developer" in lines
    assert "new content block types: hologram" in lines
    assert "new tool names: Teleport" in lines
    assert "new tool fields: eager" in lines
    assert "new models: claude-opus-6" in lines
    assert differences(old, copy.deepcopy(old)) == []


def test_gemini_cli_differences_name_what_a_new_version_changed() -> None:
    old = committed(gemini_cli_env.CLIENT)
    new = copy.deepcopy(old)
    request = new["requests"][0]
    request["path"] = "/v1beta/models/gemini-4-pro:streamGenerateContent?alt=sse"
    request["headers"]["x-gemini-session-id"] = "s"
    request["body"]["generationConfig"]["thinkingConfig"]["thinkingBudget"] = 1024
    request["body"]["contents"].append({"role": "model", "parts": [{"executableCode": {}}]})
    request["body"]["tools"][0]["functionDeclarations"].append({"name": "teleport"})
    request["body"]["tools"].append({"codeExecution": {}})
    lines = differences(old, new)
    assert "new models: gemini-4-pro" in lines
    assert "new headers: x-gemini-session-id" in lines
    assert "new thinkingConfig fields: thinkingBudget" in lines
    assert "new content roles: model" in lines
    assert "new part kinds: executableCode" in lines
    assert "new function names: teleport" in lines
    assert "new tool kinds: codeExecution" in lines
    assert differences(old, copy.deepcopy(old)) == []


def test_codex_differences_name_what_a_new_version_changed() -> None:
    old = committed(codex_env.CLIENT, codex_env.CODE_MODE_MODEL)
    new = copy.deepcopy(old)
    request = new["requests"][0]
    request["headers"]["x-codex-beta-features"] += ",hologram_v1"
    request["headers"]["x-brand-new"] = "1"
    request["body"]["brand_new_field"] = True
    request["body"]["input"].append({"type": "hologram", "role": "oracle", "content": []})
    request["body"]["input"][0]["tools"][0]["tools"].append({"type": "teleport", "name": "beam"})
    lines = differences(old, new)
    assert "new x-codex-beta-features values: hologram_v1" in lines
    assert "new headers: x-brand-new" in lines
    assert "new body fields: brand_new_field" in lines
    assert "new input item types: hologram" in lines
    assert "new message roles: oracle" not in lines  # only messages have roles that count
    assert "new tool types: teleport" in lines
    assert "new tool names: functions.beam" in lines
    assert differences(old, copy.deepcopy(old)) == []


def test_capturing_the_pinned_llm_again_gives_the_committed_capture(
    llm_binary: llm_env.Binary, tmp_path: Path
) -> None:
    """`capture.py --client llm`, run now, writes byte for byte what is committed (llm's
    request holds no date or machine detail), and finds no difference."""
    pinned = capture.pinned_output(llm_env.CLIENT)
    if install.pin(llm_env.CLIENT).version not in llm_binary.version:
        pytest.skip(f"{llm_binary.version} is not the pinned llm")
    out = tmp_path / "llm.json"
    assert capture.capture_to(llm_env.CLIENT, llm_binary.path, out=out, compare=pinned) == 0
    assert out.read_bytes() == pinned.read_bytes()

"""How two captures of a client differ (`capture.py --compare`, `make clients-latest`): the
names a decoder must understand in each, and which appeared or disappeared.

Imported by capture.py and the capture tests (not a test module itself).

For the clients of the Messages API: paths, headers, body fields, `anthropic-beta` values,
message roles, content and system block types, tools, thinking types, models. For Codex, pi
over Responses and the OpenAI Agents SDK (the Responses API): paths, headers,
`x-codex-beta-features` values, top-level fields, reasoning fields, `include` values, input item
types, message roles, content part types, tool types, names and formats, models. For Gemini CLI
(the Gemini API): paths, headers, body fields, roles, part kinds, tool kinds and function names,
generation and thinking fields, models (from the path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.clients import codex_env, gemini_cli_env


def speaks_responses(capture: Mapping[str, Any]) -> bool:
    """Codex's captures, and any other of requests to Responses (pi's over `openai-responses`);
    the others are of the Messages API."""
    return capture.get("client") == codex_env.CLIENT or bool(responses_requests(capture))


def api_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The model requests of a capture: to Responses or to Messages (`speaks_responses`)."""
    if speaks_responses(capture):
        return responses_requests(capture)
    if capture.get("client") == gemini_cli_env.CLIENT:
        return gemini_requests(capture)
    return messages_requests(capture)


def messages_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        request
        for request in capture["requests"]
        if request["path"].split("?")[0] == "/v1/messages" and isinstance(request["body"], dict)
    ]


def features(capture: Mapping[str, Any]) -> dict[str, set[str]]:
    """What a decoder must understand, as sets of names, over every request of a capture."""
    found: dict[str, set[str]] = {
        key: set()
        for key in (
            "paths",
            "body fields",
            "anthropic-beta values",
            "headers",
            "message roles",
            "content block types",
            "system block types",
            "tool names",
            "tool fields",
            "thinking types",
            "models",
        )
    }
    for request in capture["requests"]:
        found["paths"].add(f"{request['method']} {request['path']}")
        found["headers"].update(request["headers"])
    for request in messages_requests(capture):
        body, headers = request["body"], request["headers"]
        found["body fields"].update(body)
        beta = headers.get("anthropic-beta", "")
        found["anthropic-beta values"].update(v.strip() for v in beta.split(",") if v.strip())
        found["models"].add(str(body.get("model")))
        thinking = body.get("thinking")
        if isinstance(thinking, dict):
            found["thinking types"].add(str(thinking.get("type")))
        system = body.get("system")
        if isinstance(system, list):
            found["system block types"].update(str(block.get("type")) for block in system)
        for message in body.get("messages", []):
            found["message roles"].add(str(message.get("role")))
            content = message.get("content")
            if isinstance(content, list):
                found["content block types"].update(str(b.get("type")) for b in content)
            else:
                found["content block types"].add("(string content)")
        for tool in body.get("tools", []):
            found["tool names"].add(str(tool.get("name", tool.get("type"))))
            found["tool fields"].update(tool)
    return found


def responses_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        request
        for request in capture["requests"]
        if request["method"] == "POST"
        and request["path"].split("?")[0].startswith("/v1/responses")
        and isinstance(request["body"], dict)
    ]


def _codex_tools(tools: Any, found: dict[str, set[str]], prefix: str = "") -> None:
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        kind = str(tool.get("type"))
        found["tool types"].add(kind)
        name = f"{prefix}{tool.get('name', kind)}"
        if kind == "namespace":
            found["tool names"].add(f"{name} (namespace)")
            _codex_tools(tool.get("tools"), found, f"{name}.")
            continue
        found["tool names"].add(name)
        found["tool fields"].update(tool)
        form = tool.get("format")
        if isinstance(form, dict):
            found["custom tool formats"].add(f"{form.get('type')}/{form.get('syntax')}")


def codex_features(capture: Mapping[str, Any]) -> dict[str, set[str]]:
    """What a Responses decoder must understand in Codex's requests, as sets of names."""
    found: dict[str, set[str]] = {
        key: set()
        for key in (
            "paths",
            "headers",
            "x-codex-beta-features values",
            "body fields",
            "reasoning fields",
            "include values",
            "input item types",
            "message roles",
            "content part types",
            "tool types",
            "tool names",
            "tool fields",
            "custom tool formats",
            "models",
        )
    }
    for request in capture["requests"]:
        found["paths"].add(f"{request['method']} {request['path']}")
        found["headers"].update(request["headers"])
    for request in responses_requests(capture):
        body, headers = request["body"], request["headers"]
        beta = headers.get("x-codex-beta-features", "")
        found["x-codex-beta-features values"].update(
            value.strip() for value in beta.split(",") if value.strip()
        )
        found["body fields"].update(body)
        found["models"].add(str(body.get("model")))
        if isinstance(body.get("reasoning"), dict):
            found["reasoning fields"].update(body["reasoning"])
        found["include values"].update(str(value) for value in body.get("include") or [])
        _codex_tools(body.get("tools"), found)
        for item in body.get("input") if isinstance(body.get("input"), list) else []:
            if not isinstance(item, dict):
                continue
            found["input item types"].add(str(item.get("type", "(no type)")))
            if item.get("type") == "additional_tools":
                _codex_tools(item.get("tools"), found)
            if "role" in item and item.get("type") in (None, "message"):
                found["message roles"].add(str(item["role"]))
            content = item.get("content")
            if isinstance(content, list):
                found["content part types"].update(
                    str(part.get("type")) for part in content if isinstance(part, dict)
                )
    return found


def gemini_requests(capture: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        request
        for request in capture["requests"]
        if request["method"] == "POST"
        and request["path"].startswith(("/v1beta/models/", "/v1/models/"))
        and isinstance(request["body"], dict)
    ]


def gemini_features(capture: Mapping[str, Any]) -> dict[str, set[str]]:
    """What the Gemini API's decoder must understand in Gemini CLI's requests."""
    found: dict[str, set[str]] = {
        key: set()
        for key in (
            "paths",
            "headers",
            "body fields",
            "generationConfig fields",
            "thinkingConfig fields",
            "content roles",
            "part kinds",
            "tool kinds",
            "function names",
            "models",
        )
    }
    for request in capture["requests"]:
        found["paths"].add(f"{request['method']} {request['path']}")
        found["headers"].update(request["headers"])
    for request in gemini_requests(capture):
        body = request["body"]
        found["body fields"].update(body)
        found["models"].add(request["path"].split("?")[0].rpartition("/")[2].partition(":")[0])
        config = body.get("generationConfig")
        if isinstance(config, dict):
            found["generationConfig fields"].update(config)
            if isinstance(config.get("thinkingConfig"), dict):
                found["thinkingConfig fields"].update(config["thinkingConfig"])
        for content in body.get("contents") or []:
            found["content roles"].add(str(content.get("role")))
            for part in content.get("parts") or []:
                found["part kinds"].update(part)
        for tool in body.get("tools") or []:
            found["tool kinds"].update(tool)
            for declaration in tool.get("functionDeclarations") or []:
                found["function names"].add(str(declaration.get("name")))
    return found


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per name that appeared or disappeared between two captures."""
    extract = (
        gemini_features
        if old.get("client") == gemini_cli_env.CLIENT
        else codex_features
        if speaks_responses(old)
        else features
    )
    before, after = extract(old), extract(new)
    lines = []
    if len(old["requests"]) != len(new["requests"]):
        lines.append(f"requests per run: {len(old['requests'])} → {len(new['requests'])}")
    for key in before:
        added, removed = sorted(after[key] - before[key]), sorted(before[key] - after[key])
        if added:
            lines.append(f"new {key}: {', '.join(added)}")
        if removed:
            lines.append(f"removed {key}: {', '.join(removed)}")
    return lines

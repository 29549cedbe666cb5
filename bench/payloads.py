"""The request bodies the benchmark sends: a small prompt, and a coding-agent-sized request.

The large ones are shaped like what Claude Code and Codex send: a long system prompt or
instructions, 12 tools with JSON schemas, and a history of turns with tool calls and results,
about 90 KB in all. Everything is generated deterministically, so runs are comparable.
"""

from __future__ import annotations

import json
from typing import Any

MODEL = "claude-sonnet-4-6"
TOOL_COUNT = 12
SEQ = "@@SEQ@@"
"""Replaced in each request by its sequence number, so no two requests are identical."""
SEQ_BYTES = SEQ.encode()
HISTORY_TURNS = 10

_TEXT = (
    "the agent reads the repository before it edits any file and keeps each change small "
    "so that a reviewer can follow it tests run after every step and failures are reported "
    "with the command that produced them never guess a path list the directory first "
    "prefer the project's own helpers over new ones and explain what changed and why"
)
_WORDS = _TEXT.split(" ")


def prose(chars: int, seed: int = 0) -> str:
    """Deterministic English-looking text of exactly `chars` characters."""
    words: list[str] = []
    size = 0
    index = seed
    while size < chars:
        word = _WORDS[index % len(_WORDS)]
        words.append(word)
        size += len(word) + 1
        index += 7
    return " ".join(words)[:chars]


def _schema(index: int) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for field in range(8):
        properties[f"arg_{index}_{field}"] = {
            "type": "string" if field % 3 else "integer",
            "description": prose(180, seed=index * 31 + field),
        }
    return {
        "type": "object",
        "properties": properties,
        "required": [f"arg_{index}_0", f"arg_{index}_1"],
        "additionalProperties": False,
    }


def _tool_name(index: int) -> str:
    return f"tool_{index:02d}"


def anthropic_tools() -> list[dict[str, Any]]:
    return [
        {
            "name": _tool_name(i),
            "description": prose(1200, seed=i),
            "input_schema": _schema(i),
        }
        for i in range(TOOL_COUNT)
    ]


def openai_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": _tool_name(i),
            "description": prose(1200, seed=i),
            "parameters": _schema(i),
            "strict": False,
        }
        for i in range(TOOL_COUNT)
    ]


def _call_input(turn: int) -> dict[str, Any]:
    return {f"arg_{turn % TOOL_COUNT}_0": turn, f"arg_{turn % TOOL_COUNT}_1": prose(200, turn)}


def messages_small(*, stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": f"[{SEQ}] Write a haiku about loopback sockets."}],
        "stream": stream,
    }


def messages_large(*, stream: bool) -> dict[str, Any]:
    """A Claude Code-sized request: system prompt, 12 tools, a history with tool round trips."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"[{SEQ}] " + prose(2000, 1)}]
    for turn in range(HISTORY_TURNS):
        tool_id = f"toolu_bench_{turn:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": prose(300, turn + 100)},
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": _tool_name(turn % TOOL_COUNT),
                        "input": _call_input(turn),
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": prose(2700, turn + 200),
                    }
                ],
            }
        )
    messages[-1]["content"].append({"type": "text", "text": "Carry on with the next step."})
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": prose(12000, 2)},
            {"type": "text", "text": prose(3000, 3), "cache_control": {"type": "ephemeral"}},
        ],
        "tools": anthropic_tools(),
        "messages": messages,
        "metadata": {"user_id": f"user_bench_session_{SEQ}"},
        "stream": stream,
    }


def responses_small(*, stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "input": f"[{SEQ}] Write a haiku about loopback sockets.",
        "stream": stream,
        "store": False,
    }


def responses_large(*, stream: bool) -> dict[str, Any]:
    """A Codex-sized request: instructions, 12 function tools, a history of calls and outputs."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"[{SEQ}] " + prose(2000, 1)}],
        }
    ]
    for turn in range(HISTORY_TURNS):
        call_id = f"call_bench_{turn:03d}"
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": prose(300, turn + 100)}],
            }
        )
        items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": _tool_name(turn % TOOL_COUNT),
                "arguments": json.dumps(_call_input(turn)),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": call_id, "output": prose(2700, turn + 200)}
        )
    items.append(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Carry on with the next step."}],
        }
    )
    return {
        "model": MODEL,
        "instructions": prose(15000, 2),
        "tools": openai_tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "input": items,
        "stream": stream,
        "store": False,
    }


def body_bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def numbered(template: bytes, seq: int) -> bytes:
    """`template` with every `SEQ` replaced by `seq`, keeping its length."""
    return template.replace(SEQ_BYTES, b"%07d" % (seq % 10_000_000))

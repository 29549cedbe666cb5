"""The shape of a canonical request: counts and flags that describe it without its content.

`request_shape` is what the daemon logs at debug level for each request (`request_shape`): enough
to tell a client's request apart from another's when reading a trace (how many messages, which
kinds of blocks, whether tool results answer calls that are not there), and never the text, the
tool names, their arguments or any other string the client wrote. The tool set appears only as a
short hash of its names, so two requests can be seen to declare the same tools.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from kirod.canonical.request import (
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

ShapeValue = int | bool | str


def tools_hash(request: CanonicalRequest) -> str | None:
    """12 hex digits of a SHA-256 over the sorted declared tool names; None without tools."""
    if not request.tools:
        return None
    names = "\n".join(sorted(tool.name for tool in request.tools))
    return hashlib.sha256(names.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def request_shape(request: CanonicalRequest) -> dict[str, ShapeValue]:
    """Counts and flags of `request`; see the module docstring for what is never in it."""
    roles: Counter[Role] = Counter()
    calls = results = orphans = images = documents = thinking = 0
    chars = sum(len(part) for part in request.system)
    called: set[str] = set()
    for message in request.messages:
        roles[message.role] += 1
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ImageBlock):
                images += 1
            elif isinstance(block, DocumentBlock):
                documents += 1
                chars += len(block.context or "")
            elif isinstance(block, ToolUseBlock):
                calls += 1
                called.add(block.id)
            elif isinstance(block, ToolResultBlock):
                results += 1
                if block.tool_use_id not in called:
                    orphans += 1
                for part in block.content:
                    if isinstance(part, TextBlock):
                        chars += len(part.text)
                    elif isinstance(part, ImageBlock):
                        images += 1
                    else:
                        documents += 1
            elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
                thinking += 1
    shape: dict[str, ShapeValue] = {
        "protocol": request.protocol.value,
        "stream": request.stream,
        "messages": len(request.messages),
        "user_messages": roles[Role.USER],
        "assistant_messages": roles[Role.ASSISTANT],
        "system_parts": len(request.system),
        "tools": len(request.tools),
        "tool_calls": calls,
        "tool_results": results,
        "orphan_tool_results": orphans,
        "images": images,
        "documents": documents,
        "reasoning_replay": thinking > 0,
        "input_chars": chars,
        "web_search": request.web_search is not None,
    }
    digest = tools_hash(request)
    if digest is not None:
        shape["tools_hash"] = digest
    return shape

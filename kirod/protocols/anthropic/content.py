"""Messages and their content blocks → canonical messages.

`role: "system"` messages inside `messages` (Claude Code's per-turn environment notes) stay where
they are: each becomes a user message of its own at its position, which the payload builder
merges into the adjacent user turn. Hoisting them into the system prompt would change the
upstream bytes of every earlier turn whenever the note changes.

Documents: a base64 `document` (PDF, Office and text media types) becomes a `DocumentBlock`
(refused later for a model whose catalog lacks DOCUMENT input); a `text` source becomes prompt
text, so it works on every model. A document's `citations` option is accepted and has no effect.

Thinking blocks in history are replayed only if kirod signed them (see `signatures`); foreign or
altered ones are dropped, never forwarded. `server_tool_use` / `web_search_tool_result` blocks of
earlier turns go upstream as text; other server tools' blocks are refused.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import (
    Block,
    DocumentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    WebSearch,
)
from kirod.protocols.anthropic.checks import (
    check,
    choices,
    counted,
    invalid,
    spend,
    type_of,
    unsupported,
)
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.fields import MAX_MESSAGES, BlockBudget, quoted
from kirod.protocols.search import history_text, open_snippet

IMAGE_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_ROLES: Final = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.USER}
_SERVER_BLOCKS: Final = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
_ASSISTANT_ONLY: Final = frozenset({"tool_use", "thinking", "redacted_thinking"})


def conversation(value: object, signer: ThinkingSigner, budget: BlockBudget) -> tuple[Message, ...]:
    """`messages` as canonical messages, every block counted against `budget`."""
    if value is None:
        raise invalid("messages", "is required")
    items = counted(check.array(value, "messages"), MAX_MESSAGES, "messages", "messages")
    if not items:
        raise invalid("messages", "must contain at least one message")
    messages: list[Message] = []
    for i, item in enumerate(items):
        path = f"messages.{i}"
        message = check.mapping(item, path)
        name = check.text(message.get("role"), f"{path}.role")
        role = _ROLES.get(name)
        if role is None:
            raise invalid(f"{path}.role", "must be 'user', 'assistant' or 'system'")
        content = message.get("content")
        where = f"{path}.content"
        if isinstance(content, str):
            spend(budget, 1, where)
            blocks: tuple[Block, ...] = (TextBlock(content),)
        else:
            parts = check.array(content, where)
            spend(budget, len(parts), where)
            if name == "system":
                blocks = _system_content(parts, where)
            else:
                blocks = _content(parts, role, where, signer, budget)
        messages.append(Message(role, blocks))
    return tuple(messages)


def _system_content(items: list[Any], path: str) -> tuple[Block, ...]:
    """An inline system message holds text blocks only, as the top-level `system` does."""
    blocks: list[Block] = []
    for i, item in enumerate(items):
        block = check.mapping(item, f"{path}.{i}")
        if type_of(block, f"{path}.{i}") != "text":
            raise invalid(f"{path}.{i}.type", "system messages hold only 'text' blocks")
        blocks.append(TextBlock(check.text(block.get("text"), f"{path}.{i}.text")))
    return tuple(blocks)


def _content(
    items: list[Any], role: Role, path: str, signer: ThinkingSigner, budget: BlockBudget
) -> tuple[Block, ...]:
    blocks: list[Block] = []
    for i, item in enumerate(items):
        # The usual block, a text, is read before its path is made (only an error names it).
        if item.__class__ is dict and item.get("type") == "text":
            text = item.get("text")
            if text.__class__ is str:
                blocks.append(TextBlock(text))
                continue
        block = _block(check.mapping(item, f"{path}.{i}"), role, f"{path}.{i}", signer, budget)
        if block is not None:
            blocks.append(block)
    return tuple(blocks)


def _block(
    block: Mapping[str, Any], role: Role, path: str, signer: ThinkingSigner, budget: BlockBudget
) -> Block | None:
    """One content block; None for echoed reasoning kirod did not sign."""
    kind = type_of(block, path)
    if kind in _ASSISTANT_ONLY and role is not Role.ASSISTANT:
        raise invalid(f"{path}.type", f"'{kind}' blocks belong in assistant messages")
    if kind in ("tool_result", "document") and role is not Role.USER:
        raise invalid(f"{path}.type", f"'{kind}' blocks belong in user messages")
    match kind:
        case "text":
            return TextBlock(check.text(block.get("text"), f"{path}.text"))
        case "image":
            return _image(block, path)
        case "tool_use":
            return ToolUseBlock(
                id=check.nonempty_text(block.get("id"), f"{path}.id"),
                name=check.nonempty_text(block.get("name"), f"{path}.name"),
                input=check.mapping(block.get("input"), f"{path}.input"),
            )
        case "tool_result":
            return _tool_result(block, path, budget)
        case "thinking":
            return _thinking(block, path, signer)
        case "redacted_thinking":
            data = signer.unwrap_redacted(check.text(block.get("data"), f"{path}.data"))
            return None if data is None else RedactedThinkingBlock(data)
        case "document":
            return _document(block, path)
        case "search_result":
            raise unsupported(
                f"{path}.type", f"'{kind}' blocks are not supported; send text instead"
            )
        case "server_tool_use" | "web_search_tool_result" if role is Role.ASSISTANT:
            return _search_history(block, kind, path)
        case _ if kind in _SERVER_BLOCKS:
            raise unsupported(
                f"{path}.type", f"'{kind}' blocks belong to server tools kirod cannot run"
            )
        case _:
            raise invalid(f"{path}.type", f"unknown content block type {quoted(kind)}")


def _search_history(block: Mapping[str, Any], kind: str, path: str) -> TextBlock | None:
    """A web search of an earlier turn, as text: Kiro has no search blocks (`history_text`)."""
    if kind == "server_tool_use":
        if block.get("name") != WebSearch.TOOL_NAME:
            raise unsupported(f"{path}.name", "only web_search server tool calls can be replayed")
        query = check.mapping(block.get("input"), f"{path}.input").get("query")
        return TextBlock(history_text(query if isinstance(query, str) else None, ()))
    content = block.get("content")
    if not isinstance(content, list):
        return None  # an error result: the search found nothing to replay
    results = []
    for i, item in enumerate(content):
        hit = check.mapping(item, f"{path}.content.{i}")
        url = check.text(hit.get("url"), f"{path}.content.{i}.url")
        title = hit.get("title")
        snippet = open_snippet(hit.get("encrypted_content"))
        results.append((url, title if isinstance(title, str) else url, snippet))
    return TextBlock(history_text(None, results))


def _thinking(block: Mapping[str, Any], path: str, signer: ThinkingSigner) -> ThinkingBlock | None:
    thinking = check.text(block.get("thinking"), f"{path}.thinking")
    verified = signer.verify(thinking, check.text(block.get("signature"), f"{path}.signature"))
    return None if verified is None else ThinkingBlock(thinking, verified.upstream_signature)


def _image(block: Mapping[str, Any], path: str) -> ImageBlock:
    source = check.mapping(block.get("source"), f"{path}.source")
    kind = check.text(source.get("type"), f"{path}.source.type")
    if kind == "url":
        raise unsupported(f"{path}.source.type", "image URLs are not supported; send base64 data")
    if kind == "file":
        raise unsupported(
            f"{path}.source.type", "Files API images are not supported; send base64 data"
        )
    if kind != "base64":
        raise invalid(f"{path}.source.type", "must be 'base64'")
    media_type = check.text(source.get("media_type"), f"{path}.source.media_type")
    if media_type not in IMAGE_MEDIA_TYPES:
        raise invalid(f"{path}.source.media_type", f"must be one of {choices(IMAGE_MEDIA_TYPES)}")
    data = check.nonempty_text(source.get("data"), f"{path}.source.data")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{path}.source.data", "is not valid base64") from None
    return ImageBlock(media_type, data)


def _document(block: Mapping[str, Any], path: str) -> DocumentBlock | TextBlock:
    """A base64 file is a document for Kiro; a plain-text one is text, which any model reads.

    `title` names the document, `context` goes along as text; `citations` is accepted and has
    no effect (Kiro returns no citations, so answers carry none).
    """
    source = check.mapping(block.get("source"), f"{path}.source")
    kind = check.text(source.get("type"), f"{path}.source.type")
    title = block.get("title")
    name = check.document_name(title, f"{path}.title")
    context = block.get("context")
    if context is not None:
        context = check.text(context, f"{path}.context") or None
    if kind == "text":
        text = check.text(source.get("data"), f"{path}.source.data")
        return TextBlock(_text_document(name if title else None, context, text))
    if kind in ("url", "file", "content"):
        raise unsupported(
            f"{path}.source.type",
            f"'{kind}' document sources are not supported; send base64 data or text",
        )
    if kind != "base64":
        raise invalid(f"{path}.source.type", "must be 'base64' or 'text'")
    media_type = check.text(source.get("media_type"), f"{path}.source.media_type")
    return DocumentBlock(
        name,
        check.document_format(media_type, f"{path}.source.media_type"),
        check.document_data(source.get("data"), f"{path}.source.data"),
        context,
    )


def _text_document(title: str | None, context: str | None, text: str) -> str:
    """A plain-text document as prompt text, delimited so the model sees where it ends."""
    head = "".join(
        f"<{tag}>{value}</{tag}>\n"
        for tag, value in (("title", title), ("context", context))
        if value
    )
    return f"<document>\n{head}{text}\n</document>"


def _tool_result(block: Mapping[str, Any], path: str, budget: BlockBudget) -> ToolResultBlock:
    tool_use_id = check.nonempty_text(block.get("tool_use_id"), f"{path}.tool_use_id")
    is_error = block.get("is_error")
    content = block.get("content")
    parts: list[TextBlock | ImageBlock | DocumentBlock] = []
    if isinstance(content, str):
        if content:
            parts.append(TextBlock(content))
    elif content is not None:
        items = check.array(content, f"{path}.content")
        spend(budget, len(items), f"{path}.content")
        for i, item in enumerate(items):
            where = f"{path}.content.{i}"
            parts.append(_result_part(check.mapping(item, where), where))
    return ToolResultBlock(
        tool_use_id=tool_use_id,
        content=tuple(parts),
        is_error=False if is_error is None else check.boolean(is_error, f"{path}.is_error"),
    )


def _result_part(part: Mapping[str, Any], path: str) -> TextBlock | ImageBlock | DocumentBlock:
    kind = type_of(part, path)
    if kind == "text":
        return TextBlock(check.text(part.get("text"), f"{path}.text"))
    if kind == "image":
        return _image(part, path)
    if kind == "document":
        return _document(part, path)
    if kind == "tool_reference":
        # Claude Code's ToolSearch answers with references to deferred tools. Every declared
        # tool is already offered to the model, so the reference is just the tool's name.
        return TextBlock(check.nonempty_text(part.get("tool_name"), f"{path}.tool_name"))
    if kind == "search_result":
        raise unsupported(f"{path}.type", f"'{kind}' blocks are not supported; send text instead")
    raise invalid(f"{path}.type", "must be 'text', 'image', 'document' or 'tool_reference'")

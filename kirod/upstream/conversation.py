"""Client messages shaped into the turns Kiro accepts (docs/KIRO-PROTOCOL.md §2.3).

Each construction rule is one small function, named in its docstring by rule number, and
`shape_turns` applies them in an order where each rule's output satisfies the ones before it.
Nothing the client said is dropped silently: what Kiro cannot carry structurally becomes text
(orphan tool results, tool traffic under `tool_choice: none`, old images, history documents on a
model that takes none) or a clear 400 (a current message's images or documents for a model
that cannot take them). `kirod.upstream.payload` serialises the turns into the body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import (
    DocumentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.errors import ApiError, ErrorKind
from kirod.upstream.thinking_tags import ThinkingMode
from kirod.upstream.tools import MAX_NESTING, too_deep

RAW_IMAGE_HISTORY = 5

PLACEHOLDER = "(empty)"
"""Stands in for empty content (rule 5), as jwadow does. kiro.rs's lone space is not used: peers
report whitespace-only content as risky, and a visible marker tells the model nothing was said."""
CONTINUE = "Continue"
UNANSWERED = "tool call was not answered"
TOOL_RESULT_IMAGE = "(image attached to this message)"
TOOL_RESULT_DOCUMENT = "(document attached to this message)"


@dataclass(slots=True)
class _Use:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(slots=True)
class _Result:
    tool_use_id: str
    text: str
    is_error: bool


class Turn:
    """A message being shaped for Kiro; tool names are already the ones Kiro will see.

    A plain class: one is made per message of every request, and a dataclass's five list
    factories cost more than the rest of its construction."""

    __slots__ = ("documents", "images", "reasoning", "results", "role", "texts", "uses")

    def __init__(self, role: Role, texts: list[str] | None = None) -> None:
        self.role = role
        self.texts: list[str] = [] if texts is None else texts
        self.images: list[ImageBlock] = []
        self.documents: list[DocumentBlock] = []
        self.uses: list[_Use] = []
        self.results: list[_Result] = []
        self.reasoning: ThinkingBlock | RedactedThinkingBlock | None = None

    @property
    def content(self) -> str:
        return "\n\n".join(text for text in self.texts if text)

    @property
    def blank(self) -> bool:
        """Whether `content` is empty or whitespace, told without joining the texts."""
        return all(text.isspace() for text in self.texts if text)


def shape_turns(
    messages: Sequence[Message],
    model: ModelInfo,
    names: Mapping[str, str],
    tools_enabled: bool,
    mode: ThinkingMode,
) -> list[Turn]:
    """`messages` as turns Kiro accepts: rules 1, 2, 5, 6, 9, 14, 17 and 21. Rules 4 and 18
    (`split_current`, `system_entry`) come after the system text is known."""
    turns = [_to_turn(message, names, tools_enabled, mode) for message in messages]
    turns = _merge_adjacent(turns)
    _continue_after_prefill(turns)
    _dedupe_tool_results(turns)
    _pair_tools(turns)
    _limit_images(turns, model)
    _limit_documents(turns, model)
    _fill_empty(turns)
    return turns


# -- messages → turns ------------------------------------------------------------------------------


def _to_turn(
    message: Message, names: Mapping[str, str], tools_enabled: bool, mode: ThinkingMode
) -> Turn:
    """One client message as a turn; reasoning is kept only where it can be replayed
    (docs/KIRO-PROTOCOL.md §2.6)."""
    turn = Turn(message.role)
    for block in message.content:
        if isinstance(block, TextBlock):
            turn.texts.append(block.text)
        elif isinstance(block, ImageBlock):
            if message.role is Role.USER:
                turn.images.append(block)
            else:
                turn.texts.append(_image_placeholder(block))
        elif isinstance(block, DocumentBlock):
            _attach_document(turn, block)
        elif isinstance(block, ToolUseBlock):
            use = _Use(block.id, names.get(block.name, block.name), _clean_input(block.input))
            if tools_enabled:
                turn.uses.append(use)
            else:
                turn.texts.append(_use_as_text(use))
        elif isinstance(block, ToolResultBlock):
            result = _result_from_block(block, turn)
            if tools_enabled:
                turn.results.append(result)
            else:
                turn.texts.append(_result_as_text(result))
        elif (
            isinstance(block, ThinkingBlock | RedactedThinkingBlock)
            and mode == "native"
            and message.role is Role.ASSISTANT
            and turn.reasoning is None
            and (isinstance(block, RedactedThinkingBlock) or block.signature)
        ):
            turn.reasoning = block
        # Other thinking is neither replayed nor re-sent as prompt text
        # (docs/KIRO-PROTOCOL.md §2.4).
    return turn


def _result_from_block(block: ToolResultBlock, turn: Turn) -> _Result:
    """Rule 17: images inside a tool result move to the user turn's `images`; documents, like
    them, to its `documents` (Kiro's tool results hold only text and JSON)."""
    texts: list[str] = []
    for part in block.content:
        if isinstance(part, TextBlock):
            texts.append(part.text)
        elif isinstance(part, ImageBlock):
            turn.images.append(part)
            texts.append(TOOL_RESULT_IMAGE)
        else:
            _attach_document(turn, part)
            texts.append(TOOL_RESULT_DOCUMENT)
    return _Result(block.tool_use_id, "\n\n".join(texts), block.is_error)


def _attach_document(turn: Turn, document: DocumentBlock) -> None:
    """A document goes in its user entry's `documents`; Kiro has no field for its context."""
    if document.context:
        turn.texts.append(f"[context of document '{_label(document)}': {document.context}]")
    if turn.role is Role.USER:
        turn.documents.append(document)
    else:
        turn.texts.append(_document_placeholder(document))


def _use_as_text(use: _Use) -> str:
    arguments = json.dumps(use.input, ensure_ascii=False, separators=(",", ":"))
    return f"[Tool call {use.id}: {use.name} {arguments}]"


def _result_as_text(result: _Result) -> str:
    status = " (error)" if result.is_error else ""
    return f"[Tool result {result.tool_use_id}{status}]\n{result.text}"


def _image_placeholder(image: ImageBlock) -> str:
    return f"[image ({image.media_type}) omitted]"


def _document_placeholder(document: DocumentBlock) -> str:
    return f"[document '{_label(document)}' ({document.format}) omitted]"


def _label(document: DocumentBlock) -> str:
    return document.name or "untitled"


def _clean_input(value: Mapping[str, Any]) -> dict[str, Any]:
    """Rule 14: Kiro rejects tool inputs holding an empty-string key, at any depth."""

    def clean(node: Any, depth: int) -> Any:
        if depth > MAX_NESTING:
            raise too_deep("input")
        kind = node.__class__
        if kind is str or kind is int:  # most leaves, spared the ABC's slower check below
            return node
        if kind is dict or isinstance(node, Mapping):
            return {key: clean(item, depth + 1) for key, item in node.items() if key != ""}
        if isinstance(node, list):
            return [clean(item, depth + 1) for item in node]
        return node

    cleaned: dict[str, Any] = clean(value, 1)
    return cleaned


# -- conversation shape (rules 1, 2, 5, 6, 9, 17, 21) ---------------------------------------------


def _merge_adjacent(turns: Sequence[Turn]) -> list[Turn]:
    """Rule 2: consecutive same-role messages become one turn.

    Kiro accepts adjacent entries of one role today, but merging is harmless and keeps every tool
    result in the turn right after the assistant turn that asked for it, as rule 6 requires, and
    the current message whole (rule 4). Only the first signed reasoning block survives: Kiro's
    entry has one `reasoningContent`.
    """
    merged: list[Turn] = []
    for turn in turns:
        if merged and merged[-1].role is turn.role:
            last = merged[-1]
            last.texts.extend(turn.texts)
            last.images.extend(turn.images)
            last.documents.extend(turn.documents)
            last.uses.extend(turn.uses)
            last.results.extend(turn.results)
            last.reasoning = last.reasoning or turn.reasoning
        else:
            merged.append(turn)
    return merged


def _continue_after_prefill(turns: list[Turn]) -> None:
    """Rule 1: the current message is a user turn; a trailing assistant turn is a prefill.

    The prefill stays in history and the model is asked to "Continue" from it.
    """
    if not turns:
        raise ApiError(ErrorKind.INVALID_REQUEST, "the request has no messages", param="messages")
    if turns[-1].role is Role.ASSISTANT:
        turns.append(Turn(Role.USER, texts=[CONTINUE]))


def _dedupe_tool_results(turns: Sequence[Turn]) -> None:
    """Rule 9: a repeated toolUseId in one turn's results is rejected; repeats become text."""
    for turn in turns:
        seen: set[str] = set()
        kept: list[_Result] = []
        for result in turn.results:
            if result.tool_use_id in seen:
                turn.texts.append(_result_as_text(result))
            else:
                seen.add(result.tool_use_id)
                kept.append(result)
        turn.results = kept


def _pair_tools(turns: Sequence[Turn]) -> None:
    """Rule 6: results answer exactly the tool uses of the assistant turn just before them.

    A result with no matching use there becomes text in its turn (nothing is lost); a use left
    unanswered gets an error result, since Kiro rejects dangling uses. Results follow the order of
    the uses. Rule 1 guarantees every assistant turn is followed by a user turn.
    """
    for index, turn in enumerate(turns):
        if turn.role is not Role.USER:
            continue
        before = turns[index - 1] if index > 0 else None
        asked = list(dict.fromkeys(use.id for use in before.uses)) if before else []
        answers: dict[str, _Result] = {}
        for result in turn.results:
            if result.tool_use_id in asked:
                answers[result.tool_use_id] = result
            else:
                turn.texts.append(_result_as_text(result))
        turn.results = [
            answers.get(use_id) or _Result(use_id, UNANSWERED, True) for use_id in asked
        ]


def _limit_images(turns: Sequence[Turn], model: ModelInfo) -> None:
    """Rule 17: raw images only in the current message and the last 5 history entries.

    Older images (and, on a model without image input, every history image) become a text
    placeholder; an image in the current message for such a model is refused.
    """
    current = turns[-1]
    if current.images and not model.supports_images:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"model '{model.public_id}' does not accept images",
            code="unsupported_capability",
            param="messages",
        )
    recent = len(turns) - 1 - RAW_IMAGE_HISTORY
    for index, turn in enumerate(turns[:-1]):
        if index < recent or not model.supports_images:
            turn.texts.extend(_image_placeholder(image) for image in turn.images)
            turn.images = []


def _limit_documents(turns: Sequence[Turn], model: ModelInfo) -> None:
    """Rule 21: documents go only to a model that takes them (Claude, or one whose catalog lists
    DOCUMENT), as images go only to one with IMAGE: in the current message they are refused, in
    history they become a text placeholder (the conversation may have begun on another model).
    No history limit like rule 17's is known for documents, so a supporting model gets them all."""
    current = turns[-1]
    if current.documents and not model.supports_documents:
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"documents (PDF and other files) are not supported by model '{model.public_id}'; "
            "send their text instead, or use a model that accepts documents",
            code="unsupported_capability",
            param="messages",
        )
    if not model.supports_documents:
        for turn in turns[:-1]:
            turn.texts.extend(_document_placeholder(document) for document in turn.documents)
            turn.documents = []


def _fill_empty(turns: Sequence[Turn]) -> None:
    """Rule 5: no empty content, except a user turn carrying toolResults (kiro-cli sends "") and
    an assistant turn carrying toolUses (accepted in 2026 probes): those send "".

    Whitespace-only content counts as empty; every other empty turn gets PLACEHOLDER, not kiro.rs's
    " " (docs/KIRO-PROTOCOL.md §2.3).
    """
    for turn in turns:
        if not turn.blank:
            continue
        carries = turn.results if turn.role is Role.USER else turn.uses
        turn.texts = [] if carries else [PLACEHOLDER]


def split_current(turns: Sequence[Turn]) -> tuple[list[Turn], Turn]:
    """Rule 4: the last turn, the whole trailing user run (rules 1 and 2), is the current message.

    History may open with an assistant entry and end with a user one (the system entry): Kiro
    accepts both, so no filler turn is written (docs/KIRO-PROTOCOL.md §2.3).
    """
    history, current = list(turns[:-1]), turns[-1]
    assert current.role is Role.USER
    return history, current


def system_entry(system: str) -> list[Turn]:
    """Rule 18: Kiro has no system field; the system text is a first user entry of its own.

    Alone, so that it is the same first entry in every turn of a conversation (the stable prefix
    of docs/UPSTREAM.md §1.2), and with no acknowledgement after it: the model reads an invented
    assistant reply as something it said, and quotes it back.
    """
    return [Turn(Role.USER, texts=[system])] if system else []

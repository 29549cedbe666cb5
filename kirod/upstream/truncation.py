"""One continuation after Kiro cut a tool call off (modelled on AWS's client:
docs/UPSTREAM.md §3.3, §3.4).

The translator never hands out a cut-off call (`kirod.upstream.translate`); the part ends with
`tool_input_truncated` and its `Truncation`. `TruncationRecovery` answers such a part once per
client request: the same history, an assistant turn with what the part completed and the cut call
(input `{}`, never executed), and a user turn whose error tool result states the transport fact
(`CUT_OFF_NOTICE`). The model's answer streams into the same client message. A second cut, or a
part that already handed the client a whole call (its result is the client's to give), keeps the
part's error: the client gets its protocol's error, never a fake end.

`CUT_OFF_NOTICE` is the one text kirod writes for the model to read (docs/guide/apis.md, "What
kirod adds to a conversation").
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Final

from kirod import log
from kirod.canonical.request import (
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kirod.upstream.step import Next, Part
from kirod.upstream.translate import Truncation

__all__ = ["CUT_OFF_NOTICE", "TruncationRecovery", "cut_off_notice"]

logger = logging.getLogger(__name__)

CUT_OFF_NOTICE: Final = (
    "The upstream service cut this tool call off after {bytes_received} bytes and "
    "{elapsed_s:.0f} s, before its input was complete, so it was not executed. "
    "Split the work into smaller tool calls."
)
"""The error tool result a continuation tells the model; formatted with a `Truncation`'s fields."""

# The blocks of a part the model wrote itself, replayed as its turn.
_REPLAYED = (TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock)


def cut_off_notice(cut: Truncation) -> str:
    return CUT_OFF_NOTICE.format(bytes_received=cut.bytes_received, elapsed_s=cut.elapsed_s)


class TruncationRecovery:
    """A `Step` for one client request: at most one continuation after a cut-off tool call."""

    def __init__(self) -> None:
        self._continued = False

    async def after(self, part: Part) -> Next | None:
        cut = part.truncation
        if cut is None or self._continued:
            return None
        request = part.request
        # Calls of tools kirod runs (a web search) were never shown nor run: not replayed.
        completed = tuple(
            b
            for b in part.completion.content
            if isinstance(b, _REPLAYED)
            and not (isinstance(b, ToolUseBlock) and b.name in request.server_tools)
        )
        if any(isinstance(block, ToolUseBlock) for block in completed):
            return None  # the client holds a whole call: only it can answer for that one
        self._continued = True
        log.event(
            logger,
            "tool_call_continued",
            level=logging.WARNING,
            tool=cut.tool_name,
            cause=cut.cause,
            bytes=cut.bytes_received,
            elapsed_s=cut.elapsed_s,
        )
        assistant = Message(
            Role.ASSISTANT, (*completed, ToolUseBlock(cut.tool_use_id, cut.tool_name, {}))
        )
        result = ToolResultBlock(cut.tool_use_id, (TextBlock(cut_off_notice(cut)),), is_error=True)
        messages = (*request.messages, assistant, Message(Role.USER, (result,)))
        return Next(dataclasses.replace(request, messages=messages))

"""The public face of kirod extensions: everything an extension author imports, from here only.

Extensions are hooks on the canonical request, its event stream, its completion and its errors.

An extension is an `Extension` subclass published under the entry-point group `kirod.extensions`
and enabled by that name with an `[extensions.NAME]` table of its options. Its hooks see only
canonical objects, so one extension works alike on every public protocol and transport:

    on_request(request) -> request         before routing; may return a changed copy
    on_stream_event(event) -> event | None  each outgoing event; None drops it, a list of
                                           events takes its place
    on_response(completion)                the assembled message, when the stream completes
    on_error(error)                        the `ApiError` the client is told (observes only)

Inside `on_request`, `key_budget()` tells what the request's API key has left of its budgets
(None when the key has none), as it stands before this request's own reservation.

kirod calls only the hooks a class overrides, in `priority` order (lower first); a hook that
is a coroutine runs under `timeout_s`. An exception, a timeout or a broken rule is logged with
the extension's name and the exception's type (never its text), then either fails the request
with a fixed 500 `extension_failed` error or is skipped (the hook's input goes on unchanged),
per `on_failure`.
A failing `on_error` never replaces the error it observed.

The event grammar (`kirod.canonical.events`) stays valid whatever the hooks do: structural
events (message start and stop, block start and stop, whole blocks, errors) pass unchanged and
cannot be dropped; a hook may drop or change deltas and usage, and put deltas of the open block
or usage before or after the event it was given (a watermark adds a `TextDelta` before a text
block's `BlockStop`). A hook that breaks these rules has failed. `on_request` may not change the
request's id, protocol or `stream`: the route that decoded it answers in those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SearchResults,
    ServerToolUse,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    ClientProtocol,
    DocumentBlock,
    ImageBlock,
    Message,
    Reasoning,
    RedactedThinkingBlock,
    Role,
    Sampling,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolChoiceMode,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    WebSearch,
)
from kirod.errors import ApiError, ErrorKind

__all__ = [
    "ApiError",
    "Block",
    "BlockKind",
    "BlockStart",
    "BlockStop",
    "CanonicalCompletion",
    "CanonicalEvent",
    "CanonicalRequest",
    "ClientProtocol",
    "DocumentBlock",
    "ErrorEvent",
    "ErrorKind",
    "Extension",
    "ImageBlock",
    "KeyBudget",
    "Message",
    "MessageStart",
    "MessageStop",
    "OnFailure",
    "OptionSpec",
    "Produced",
    "Reasoning",
    "RedactedThinking",
    "RedactedThinkingBlock",
    "Role",
    "Sampling",
    "SearchResults",
    "ServerToolUse",
    "SignatureDelta",
    "StopReason",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "ToolChoice",
    "ToolChoiceMode",
    "ToolInputDelta",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "Usage",
    "WebSearch",
    "key_budget",
]


@dataclass(frozen=True)
class KeyBudget:
    """What a request's API key has left: credits of its UTC day and month, tokens of its
    last minute; None where the key sets no such limit."""

    key_id: str
    credits_today: float | None
    credits_this_month: float | None
    tokens_this_minute: int | None


_KEY_BUDGET: ContextVar[KeyBudget | None] = ContextVar("kirod_key_budget", default=None)


def key_budget() -> KeyBudget | None:
    """The request's key's budget left, inside `on_request`; None when it has no budget."""
    return _KEY_BUDGET.get()


def budget_told(budget: KeyBudget | None) -> Token[KeyBudget | None]:
    """Set what `key_budget()` answers in this context (the extension runner does, around
    `on_request`); the token resets it."""
    return _KEY_BUDGET.set(budget)


def budget_untold(token: Token[KeyBudget | None]) -> None:
    _KEY_BUDGET.reset(token)


OnFailure = Literal["fail", "skip"]
Produced = CanonicalEvent | Sequence[CanonicalEvent] | None


@dataclass(frozen=True)
class OptionSpec:
    """One option an extension takes: its type, its default, and whether to hide its value."""

    type: type[str] | type[int] | type[float] | type[bool]
    default: str | int | float | bool
    secret: bool = False
    help: str = ""


class Extension:
    """Base of every extension: override the hooks you need, each as a plain `def` or as an
    `async def`. A plain one costs nothing more than its call; an `async def` one (for a hook
    that waits on something) runs under the extension's `timeout_s`.

    `options` holds the validated `[extensions.NAME]` table, every `schema` key present.
    """

    priority: ClassVar[int] = 100
    on_failure: ClassVar[OnFailure] = "fail"
    schema: ClassVar[Mapping[str, OptionSpec]] = {}

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = options

    def on_request(
        self, request: CanonicalRequest
    ) -> CanonicalRequest | Awaitable[CanonicalRequest]:
        return request

    def on_stream_event(self, event: CanonicalEvent) -> Produced | Awaitable[Produced]:
        return event

    def on_response(self, completion: CanonicalCompletion) -> Awaitable[None] | None:
        return None

    def on_error(self, error: ApiError) -> Awaitable[None] | None:
        return None

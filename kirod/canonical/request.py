"""CanonicalRequest: what a client asked for, independent of the protocol it spoke.

Decoders build it, the payload builder and the account scheduler read it. It carries only what
some client can express and some consumer needs; anything a protocol cannot map here is rejected by
that protocol's decoder with a 400 rather than approximated.

All containers are tuples. JSON-valued fields (tool input, input schemas) stay plain JSON objects
typed as read-only `Mapping`s, so codecs can serialise them without conversion.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias


class ClientProtocol(enum.Enum):
    """The public API a request arrived on; its encoder renders the answer."""

    ANTHROPIC_MESSAGES = "anthropic_messages"
    OPENAI_RESPONSES = "openai_responses"
    OPENAI_CHAT = "openai_chat"
    OLLAMA_CHAT = "ollama_chat"
    GEMINI = "gemini"


class Role(enum.Enum):
    """Conversation roles; system text lives in `CanonicalRequest.system`, not in a message."""

    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str
    data_base64: str


DocumentFormat: TypeAlias = Literal["pdf", "csv", "doc", "docx", "html", "md", "txt", "xls", "xlsx"]

DOCUMENT_MEDIA_TYPES: Mapping[str, DocumentFormat] = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "text/html": "html",
    "text/markdown": "md",
    "text/plain": "txt",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
"""Media types of the formats Kiro's `userInputMessage.documents[].format` takes."""


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """An attached file (PDF, Office, text formats), sent as `userInputMessage.documents`.

    `name` is the client's file name or title; `data_base64` is checked base64 of at most
    `kirod.protocols.fields.MAX_DOCUMENT_BYTES` bytes. `context` is what the client says about
    the document (Anthropic's `context`); Kiro has no field for it, so it goes as text.
    """

    name: str
    format: DocumentFormat
    data_base64: str
    context: str | None = None


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call made by the assistant; `input` is the parsed JSON arguments object."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The user's answer to the tool call `tool_use_id`."""

    tool_use_id: str
    content: tuple[TextBlock | ImageBlock | DocumentBlock, ...]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Model reasoning; only signed reasoning may be replayed upstream
    (docs/KIRO-PROTOCOL.md §2.6)."""

    thinking: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class RedactedThinkingBlock:
    """Opaque reasoning the client must echo back verbatim."""

    data: str


Block: TypeAlias = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
)


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


class ToolChoiceMode(enum.Enum):
    AUTO = "auto"
    NONE = "none"
    ANY = "any"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """How the model may use tools; `name` is set exactly when `mode` is TOOL."""

    mode: ToolChoiceMode = ToolChoiceMode.AUTO
    name: str | None = None

    def __post_init__(self) -> None:
        if (self.mode is ToolChoiceMode.TOOL) != (self.name is not None):
            raise ValueError("ToolChoice.name is required for TOOL and forbidden otherwise")


Effort: TypeAlias = Literal["low", "medium", "high", "xhigh", "max"]


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Requested reasoning: an effort level, a token budget, or both.

    Anthropic clients send budgets, OpenAI clients send efforts; the payload builder picks the
    mechanism the model supports. `summary` is the client's display preference (Anthropic
    `display`, Responses `reasoning.summary`), passed through so encoders can honour it.
    """

    effort: Effort | None = None
    budget_tokens: int | None = None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None


@dataclass(frozen=True, slots=True)
class WebSearch:
    """A hosted web-search tool the client declared: kirod runs the searches (Kiro's MCP).

    `query` is set for a search-only call (Claude Code's WebSearch side call: one user message
    naming the query, this tool alone), which kirod answers without a model turn. Otherwise the
    tool is declared to the model under `TOOL_NAME` and each call runs inside the turn, at most
    `max_uses` times.
    """

    TOOL_NAME: ClassVar[str] = "web_search"
    max_uses: int = 5
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    query: str | None = None


@dataclass(frozen=True, slots=True)
class CanonicalRequest:
    """One decoded client request.

    `model` is the public name exactly as the client sent it (resolved to a Kiro id later, so
    responses can echo it). `affinity_key` groups requests of one conversation onto one account.
    `metadata` is opaque client data kept for stored responses; it is never sent upstream.
    """

    request_id: str
    protocol: ClientProtocol
    model: str
    messages: tuple[Message, ...]
    system: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = ToolChoice()
    reasoning: Reasoning | None = None
    max_output_tokens: int | None = None
    stop_sequences: tuple[str, ...] = ()
    sampling: Sampling = Sampling()
    affinity_key: str | None = None
    stream: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    web_search: WebSearch | None = None

    @property
    def server_tools(self) -> frozenset[str]:
        """Tools kirod declares upstream and runs itself; the client never sees their calls."""
        if self.web_search is None or self.web_search.query is not None:
            return frozenset()
        return frozenset({WebSearch.TOOL_NAME})

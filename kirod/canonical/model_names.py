"""What a model's id says: its maker, line, version and context size, and the one table of
traits read from a name (docs/KIRO-PROTOCOL.md §2.6, §2.7, §6.2).

Kiro's ListAvailableModels says most of what kirod needs of a model: limits, input types, prompt
caching, the effort field it takes. What the list leaves out is read from the model's id here,
and only here. Names are parsed, not looked up in a list of known families: any
`claude-<line>-<version>` is a Claude line whatever the word (`fable`, `mythos`), and any
`gpt-<version>-<tier>` a GPT tier (`sol`, `astra`), so a model Kiro launches today resolves and
gets sensible traits with no release of kirod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias

from kirod.canonical.request import Effort

Vendor: TypeAlias = Literal["claude", "gpt"]
ReasoningFieldStyle: TypeAlias = Literal["none", "output_config", "reasoning"]
"""Which root `additionalModelRequestFields` key carries an effort (docs/KIRO-PROTOCOL.md §2.6):
Claude takes `output_config`, GPT-5.6 takes `reasoning`, and Claude 4.5 refuses any such field."""

_CONTEXT_SUFFIX = re.compile(r"\[(?P<size>\d+[km])\]$")
_PREFIXES = ("anthropic/", "openai/", "kiro/")
_LEGACY_ENUM = re.compile(r"^(?P<body>claude_[a-z0-9_]+?)_v\d+_\d+$")
_LINE_VERSION = re.compile(
    r"^claude-(?P<line>[a-z]+)-(?P<major>\d+)(?:[.-](?P<minor>\d{1,2}))?"
    r"(?:-(?:\d{8}|latest))?(?P<m1>-1m)?$"
)
_VERSION_LINE = re.compile(
    r"^claude-(?P<major>\d+)(?:[.-](?P<minor>\d{1,2}))?-(?P<line>[a-z]+)(?:-[a-z0-9-]+)?$"
)
_GPT = re.compile(
    r"^gpt-(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:-(?P<tier>[a-z][a-z0-9-]*?))?"
    r"(?:-(?:\d{4}-\d{2}-\d{2}|latest))?$"
)
_OTHER_OPENAI = re.compile(r"^(?:gpt|codex|o\d+)(?:-[a-z0-9.-]+)?$")
_WORD = re.compile(r"^[a-z]+$")
_NOT_LINES = frozenset({"latest", "claude", "gpt"})


@dataclass(frozen=True, slots=True)
class ModelName:
    """A model id as read: `claude-fable-5-1[1m]` is Claude line `fable`, version (5, 1), 1M.

    `line` is a Claude line (`opus`, `fable`) or a GPT tier (`sol`); `version` is empty when
    the name has none (`opus`, `gpt-daybreak-blue-latest`). `spellings` are the Kiro ids the
    name may mean exactly, most likely first.
    """

    vendor: Vendor | None
    line: str | None
    version: tuple[int, ...]
    million: bool
    spellings: tuple[str, ...]


def _normal(name: str) -> tuple[str, bool]:
    """Lowercase, without a provider prefix or Claude Code's `[1m]`/`[200k]` context hint."""
    normal = name.strip().lower()
    million = False
    if hint := _CONTEXT_SUFFIX.search(normal):
        million = hint["size"] == "1m"
        normal = normal[: hint.start()].strip()
    for prefix in _PREFIXES:
        normal = normal.removeprefix(prefix)
    if legacy := _LEGACY_ENUM.match(normal):
        normal = legacy["body"].replace("_", "-")  # CLAUDE_SONNET_4_5_20250929_V1_0
    return normal, million


def _version(major: str, minor: str | None) -> tuple[int, ...]:
    return (int(major), int(minor)) if minor is not None else (int(major),)


def parse_name(name: str) -> ModelName:
    """Read a client's or Kiro's model id, by jwadow's normalizer made general
    (docs/KIRO-PROTOCOL.md §2.7)."""
    normal, million = _normal(name)
    if normal == "auto-kiro":
        return ModelName(None, None, (), False, ("auto",))
    if m := _LINE_VERSION.match(normal):
        version = _version(m["major"], m["minor"])
        spelling = f"claude-{m['line']}-{'.'.join(map(str, version))}{m['m1'] or ''}"
        line = None if m["line"] in _NOT_LINES else m["line"]
        return ModelName("claude", line, version, million or bool(m["m1"]), (spelling,))
    if m := _VERSION_LINE.match(normal):
        # `claude-3-7-sonnet` was Kiro's own spelling; `claude-4.5-opus-high` means opus 4.5.
        version = _version(m["major"], m["minor"])
        dotted = ".".join(map(str, version))
        spellings = (f"claude-{dotted}-{m['line']}", f"claude-{m['line']}-{dotted}")
        return ModelName("claude", m["line"], version, million, spellings)
    if m := _GPT.match(normal):
        return ModelName("gpt", m["tier"], _version(m["major"], m["minor"]), million, (normal,))
    if _OTHER_OPENAI.match(normal):
        return ModelName("gpt", None, (), million, (normal,))
    if normal.startswith("claude"):
        return ModelName("claude", None, (), million, (normal,))
    return ModelName(None, None, (), million, (normal,))


def line_word(name: str) -> str | None:
    """A bare word (`opus`, `Fable`): the Claude line it names when some account offers one."""
    normal, _ = _normal(name)
    return normal if _WORD.match(normal) and normal not in _NOT_LINES else None


# -- traits read from a name: the one table ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Traits:
    """What a name tells of a model; None: this rule says nothing of it."""

    provider: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    supports_images: bool | None = None
    supports_documents: bool | None = None
    reasoning_field_style: ReasoningFieldStyle | None = None
    default_effort: Effort | None = None


@dataclass(frozen=True, slots=True)
class NameRule:
    """Traits for the ids that match every condition given: the vendor, the line, a version
    at least `since` or below `before`, a regular expression on the Kiro id."""

    why: str
    traits: Traits
    vendor: Vendor | None = None
    line: str | None = None
    since: tuple[int, ...] | None = None
    before: tuple[int, ...] | None = None
    pattern: str | None = None

    def matches(self, kiro_id: str, name: ModelName) -> bool:
        return (
            (self.vendor is None or name.vendor == self.vendor)
            and (self.line is None or name.line == self.line)
            and (self.since is None or (bool(name.version) and name.version >= self.since))
            and (self.before is None or (bool(name.version) and name.version < self.before))
            and (self.pattern is None or re.search(self.pattern, kiro_id) is not None)
        )


MILLION = 1_000_000
DEFAULT_CONTEXT_WINDOW = 200_000

NAME_RULES: tuple[NameRule, ...] = (
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: Opus 5.5 writes up to 128,000 tokens, default effort medium",
        Traits(max_output_tokens=128_000, default_effort="medium"),
        vendor="claude",
        line="opus",
        since=(5, 5),
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: Sonnet 5.5 writes up to 128,000 tokens, default effort high",
        Traits(max_output_tokens=128_000, default_effort="high"),
        vendor="claude",
        line="sonnet",
        since=(5, 5),
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.6: Claude 4.5 and older refuse any additionalModelRequestFields",
        Traits(reasoning_field_style="none"),
        vendor="claude",
        before=(4, 6),
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: a -1m id is the 1M-context variant",
        Traits(context_window=MILLION),
        pattern=r"-1m$",
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: Sonnet and Opus from 4.6 have a 1M window",
        Traits(context_window=MILLION),
        vendor="claude",
        pattern=r"^claude-(sonnet|opus)-",
        since=(4, 6),
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: Claude from 5 has a 1M window",
        Traits(context_window=MILLION),
        vendor="claude",
        since=(5,),
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.6: Claude takes its effort in output_config; "
        "docs/KIRO-PROTOCOL.md §2.3: Claude reads documents though no catalog lists DOCUMENT",
        Traits(
            provider="anthropic",
            context_window=DEFAULT_CONTEXT_WINDOW,
            max_output_tokens=64_000,
            supports_images=True,
            supports_documents=True,
            reasoning_field_style="output_config",
        ),
        vendor="claude",
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.6, §2.7: GPT reasons natively, effort in reasoning; 272k window",
        Traits(
            provider="openai",
            context_window=272_000,
            max_output_tokens=128_000,
            supports_images=True,
            reasoning_field_style="reasoning",
        ),
        vendor="gpt",
    ),
    NameRule(
        "docs/KIRO-PROTOCOL.md §2.7: the open-weight models take text only",
        Traits(max_output_tokens=32_000, supports_images=False),
        pattern=r"^(deepseek|glm|minimax|qwen|kimi)",
    ),
    NameRule(
        "anything else: Claude-like limits, prompt-tag thinking",
        Traits(
            provider="kiro",
            context_window=DEFAULT_CONTEXT_WINDOW,
            max_output_tokens=64_000,
            supports_images=True,
            supports_documents=False,
            reasoning_field_style="none",
        ),
    ),
)
"""Each trait is taken from the first rule that matches and says it; the last says them all."""


def traits_of(kiro_id: str) -> dict[str, Any]:
    """Every trait of `kiro_id` by `NAME_RULES`, by its `Traits` field name."""
    name = parse_name(kiro_id)
    found: dict[str, Any] = {}
    for rule in NAME_RULES:
        if not rule.matches(kiro_id, name):
            continue
        for item in fields(Traits):
            value = getattr(rule.traits, item.name)
            if value is not None:
                found.setdefault(item.name, value)
    return found


def display_name(kiro_id: str) -> str:
    """A readable name for a model the catalog gives none: `claude-fable-6` → Claude Fable 6."""
    name = parse_name(kiro_id)
    version = ".".join(map(str, name.version))
    if name.vendor == "claude" and name.line and version:
        suffix = " (1M context)" if kiro_id.endswith("-1m") else ""
        return f"Claude {name.line.title()} {version}{suffix}"
    if name.vendor == "gpt" and version:
        return f"GPT-{version} {name.line.title()}" if name.line else f"GPT-{version}"
    return kiro_id

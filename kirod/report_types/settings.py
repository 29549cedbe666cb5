"""What the daemon runs with: its effective settings (`GET /config`, secrets masked) and the
extensions it loaded, with their options (`GET /extensions`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kirod.report_types.reading import text_or_none


@dataclass(frozen=True)
class Config:
    """GET /config: the effective settings by name, secrets replaced by a marker."""

    config_path: str | None  # None: defaults and the environment only
    settings: dict[str, Any]
    document: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self.document

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        return cls(
            config_path=text_or_none(data.get("config_path")),
            settings=dict(data["settings"]),
            document=data,
        )


@dataclass(frozen=True)
class ExtensionInfo:
    """One loaded extension; options its schema marks secret show as `<redacted>`."""

    name: str  # its entry-point name, as in [extensions.NAME]
    version: str  # its distribution's version
    priority: int  # lower runs first
    on_failure: str  # "fail" or "skip"
    timeout_s: float  # the bound of each hook call
    hooks: tuple[str, ...]  # the hooks it implements
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hooks": list(self.hooks)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtensionInfo:
        return cls(
            name=str(data["name"]),
            version=str(data["version"]),
            priority=int(data["priority"]),
            on_failure=str(data["on_failure"]),
            timeout_s=float(data["timeout_s"]),
            hooks=tuple(data.get("hooks", ())),
            options=dict(data.get("options", {})),
        )


@dataclass(frozen=True)
class ExtensionList:
    """GET /extensions: the loaded extensions, in the order their hooks run."""

    extensions: tuple[ExtensionInfo, ...]

    def to_json(self) -> dict[str, Any]:
        return {"extensions": [item.to_json() for item in self.extensions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtensionList:
        return cls(tuple(ExtensionInfo.from_json(item) for item in data["extensions"]))

"""What an option declaration says: its `Kind`, default, bounds, and the environment variable and
flag named after it."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "KIROD_"


class Kind(enum.Enum):
    STR = "string"
    INT = "integer"
    FLOAT = "number"
    BOOL = "boolean"
    PATH = "path"
    LIST = "list of strings"
    ORIGINS = "list of origins (scheme://host[:port])"
    HOSTS = "list of host names"
    CHOICE = "one of"
    URL = "http(s) URL"
    MAP = "table of strings"
    WEBHOOKS = "list of webhook tables"
    EXTENSIONS = "extension tables"


@dataclass(frozen=True)
class Option:
    name: str
    kind: Kind
    help: str
    default: Any = None
    default_factory: Callable[[Mapping[str, str], str], Any] | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    optional: bool = False
    secret: bool = False
    min_item_length: int = 0  # LIST: shortest item accepted

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def describe_type(self) -> str:
        text = self.kind.value
        if self.kind is Kind.CHOICE:
            text = "one of " + ", ".join(self.choices)
        if self.minimum is not None and self.maximum is not None:
            text += f" from {self.minimum:g} to {self.maximum:g}"
        elif self.minimum is not None:
            text += f" >= {self.minimum:g}"
        return text

"""The models the accounts offer and how other names resolve (`GET /models`, `kiroctl models`):
aliases, Claude families, the substitutions made since start, and what serves each id a
supported client sends by default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LearnedWindowRow:
    """A window kirod learned an account really has for a model, unlike the listed one."""

    account: str
    window: int  # what Kiro's context percentage is of on the account
    learned_at: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnedWindowRow:
        return cls(str(data["account"]), int(data["window"]), float(data["learned_at"]))


@dataclass(frozen=True)
class ModelRow:
    id: str  # the public id clients ask for
    kiro_id: str
    context_window: int  # the prompt limit every offering account takes
    max_output_tokens: int
    accounts: tuple[str, ...]  # the ids of the accounts that offer it
    listed_window: int = 0  # the catalog's maxInputTokens
    learned: tuple[LearnedWindowRow, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelRow:
        return cls(
            id=str(data["id"]),
            kiro_id=str(data["kiro_id"]),
            context_window=int(data["context_window"]),
            max_output_tokens=int(data["max_output_tokens"]),
            accounts=tuple(str(item) for item in data.get("accounts") or ()),
            listed_window=int(data.get("listed_window") or data["context_window"]),
            learned=tuple(LearnedWindowRow.from_json(w) for w in data.get("learned_windows") or ()),
        )


@dataclass(frozen=True)
class Substitution:
    """A model name that was served by another model since kirod started."""

    requested: str
    served: str
    via: str  # how: "alias", "family" (Claude line), "tier" or "newest" (GPT)


@dataclass(frozen=True)
class ClientModelRow:
    """An id a supported client sends by default, and what serves it now (None: nothing)."""

    client: str
    role: str
    id: str
    served: str | None
    via: str | None
    why: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientModelRow:
        served, via = data.get("served"), data.get("via")
        return cls(
            client=str(data["client"]),
            role=str(data["role"]),
            id=str(data["id"]),
            served=None if served is None else str(served),
            via=None if via is None else str(via),
            why=str(data.get("why") or ""),
        )


@dataclass(frozen=True)
class Models:
    """GET /models: what the accounts offer (`source` "accounts"), or the built-in list
    ("static") before any catalog is known, and how other names are resolved."""

    source: str
    models: tuple[ModelRow, ...]
    fallback: str  # "family" or "strict"
    aliases: dict[str, str]
    families: dict[str, str]  # family word → the Kiro id it resolves to
    substitutions: tuple[Substitution, ...]
    clients: tuple[ClientModelRow, ...]
    document: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self.document

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Models:
        return cls(
            source=str(data["source"]),
            models=tuple(ModelRow.from_json(item) for item in data["models"]),
            fallback=str(data["fallback"]),
            aliases={str(k): str(v) for k, v in (data.get("aliases") or {}).items()},
            families={str(k): str(v) for k, v in (data.get("families") or {}).items()},
            substitutions=tuple(
                Substitution(str(s["requested"]), str(s["served"]), str(s["via"]))
                for s in data.get("substitutions") or ()
            ),
            clients=tuple(ClientModelRow.from_json(row) for row in data.get("clients") or ()),
            document=data,
        )

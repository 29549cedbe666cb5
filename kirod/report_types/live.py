"""`kiroctl doctor --live`: the checks of what kirod believes about Kiro, planned and run on one
account (`POST /doctor/live`).

The plan says what each check sends and what the chats are expected to cost, before anything is
spent; the report gives each belief a verdict (`confirmed`, `contradicted`, `unknown`) with a
one-line why. `LiveReport.redacted` is what a bug report may carry: no account id or label, no
prompt; the whys name models, codes, counts and key names only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Verdict = Literal["confirmed", "contradicted", "unknown"]
VERDICTS: tuple[Verdict, ...] = ("confirmed", "contradicted", "unknown")


@dataclass(frozen=True)
class LiveStep:
    """One planned check: the belief it tests, what it sends Kiro, and its cost."""

    name: str  # catalog, usage, profiles, web_search, chat, effort, window
    belief: str
    sends: str
    credits: float  # the most it is expected to cost (0: no credits)
    optional: bool = False  # the effort chat: only when the user agrees to it

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveStep:
        return cls(
            name=str(data["name"]),
            belief=str(data["belief"]),
            sends=str(data["sends"]),
            credits=float(data["credits"]),
            optional=bool(data.get("optional", False)),
        )


@dataclass(frozen=True)
class LivePlan:
    account_id: str
    account_label: str
    model: str | None  # the chat's: the cheapest the catalog offers; None: no chat possible
    rate_multiplier: float | None
    effort_model: str | None  # the effort chat's: the cheapest whose schema has effort
    prompt: str  # the fixed prompt of the chats, never anything of the user's
    steps: tuple[LiveStep, ...]

    def credits(self, *, effort: bool = True) -> float:
        """The most the planned chats are expected to cost, with or without the effort chat."""
        return round(sum(s.credits for s in self.steps if effort or not s.optional), 4)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LivePlan:
        rate = data.get("rate_multiplier")
        return cls(
            account_id=str(data["account_id"]),
            account_label=str(data["account_label"]),
            model=None if data.get("model") is None else str(data["model"]),
            rate_multiplier=None if rate is None else float(rate),
            effort_model=None if data.get("effort_model") is None else str(data["effort_model"]),
            prompt=str(data["prompt"]),
            steps=tuple(LiveStep.from_json(step) for step in data["steps"]),
        )


@dataclass(frozen=True)
class Belief:
    """One belief's verdict; `drift` lists what Kiro answered during its check that kirod does
    not know, as `kind at where: facts`."""

    name: str
    belief: str
    verdict: Verdict
    why: str
    drift: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Belief:
        verdict = str(data["verdict"])
        return cls(
            name=str(data["name"]),
            belief=str(data["belief"]),
            verdict=next((v for v in VERDICTS if v == verdict), "unknown"),
            why=str(data["why"]),
            drift=tuple(str(item) for item in data.get("drift", ())),
        )


@dataclass(frozen=True)
class LiveReport:
    plan: LivePlan
    ran: bool  # False: only the plan (nothing was sent that costs credits)
    beliefs: tuple[Belief, ...]
    credits: float | None  # what Kiro metered for the chats; None: none came
    started_at: float | None
    duration_ms: int | None
    version: str  # the kirod that ran the checks

    def verdicts(self) -> dict[str, int]:
        return {v: sum(b.verdict == v for b in self.beliefs) for v in VERDICTS}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def redacted(self) -> dict[str, Any]:
        """The report without the account's id and label or the prompt: what a bug report
        carries."""
        plan = {
            key: value
            for key, value in self.plan.to_json().items()
            if key not in ("account_id", "account_label", "prompt")
        }
        prompt = self.plan.prompt
        plan["steps"] = [
            {
                **step,
                "sends": step["sends"].replace(prompt, "the fixed prompt")
                if prompt
                else step["sends"],
            }
            for step in plan["steps"]
        ]
        return {**self.to_json(), "plan": plan}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveReport:
        credits, started, duration = (
            data.get("credits"),
            data.get("started_at"),
            data.get("duration_ms"),
        )
        return cls(
            plan=LivePlan.from_json(data["plan"]),
            ran=bool(data["ran"]),
            beliefs=tuple(Belief.from_json(item) for item in data["beliefs"]),
            credits=None if credits is None else float(credits),
            started_at=None if started is None else float(started),
            duration_ms=None if duration is None else int(duration),
            version=str(data["version"]),
        )

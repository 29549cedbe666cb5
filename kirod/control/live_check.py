"""`kiroctl doctor --live`: what kirod believes about Kiro, checked live on one of the user's
accounts, each belief confirmed, contradicted or unknown with a one-line why.

The checks use the machinery that serves requests, not a copy of it: the model directory reads
the catalog (ListAvailableModels), the usage probe reads getUsageLimits, profile discovery asks
ListAvailableProfiles (GetProfile for a key), web search's MCP call lists the tools, and the
exchange sends the chats. Each runs in its own `kirod.drift.watching` block: what Kiro answers
during it that kirod does not know (the drift the machinery records anyway) counts against that
check's belief, whatever other requests meet meanwhile.

Money is the user's. Without `confirm` only the plan is answered, after reading nothing that
costs credits (the account's catalog, as `kiroctl models` reads it): the account, each check,
the fixed prompt the chats send (`PROMPT`, never anything of the user's), the chat's model (the
cheapest the account's catalog offers by its rate multiplier), the effort chat's (the cheapest
whose catalog schema takes an effort; optional, a second chat) and the credits each may cost. A
confirmed run must name the models it was shown; when the plan moved since, it is refused.
Bounded: one read of each side API, at most two chats, `CHECK_TIMEOUT_S` a check,
`CHAT_TIMEOUT_S` a chat and `TOTAL_TIMEOUT_S` in all; a run at a time.

Nothing of the account's state changes but what any request would change: the catalog read is
cached, the usage snapshot stored, and drift recorded. A refusal of the root field found here is
reported, not remembered (the next request finds it out and falls back, as ever).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from kirod import __version__, drift
from kirod.accounts.account import to_upstream
from kirod.accounts.maintenance import Maintenance
from kirod.accounts.model_directory import ModelDirectory
from kirod.accounts.profiles import discover
from kirod.accounts.tokens import TokenKeeper
from kirod.accounts.windows import DISAGREEMENT, rounded
from kirod.canonical.catalog import STATIC_CATALOG, ModelCatalog, ModelInfo
from kirod.canonical.events import ErrorEvent
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    Message,
    Reasoning,
    Role,
    TextBlock,
)
from kirod.errors import ControlConflict, ControlNotFound, ControlUpstreamFailed, KirodError
from kirod.report_types.live import Belief, LivePlan, LiveReport, LiveStep, Verdict
from kirod.storage.accounts import AccountRecord, AccountStore
from kirod.upstream.client import KiroClient, UpstreamAccount
from kirod.upstream.errors import (
    Failure,
    UpstreamError,
    UpstreamHttpError,
    UpstreamProtocolError,
)
from kirod.upstream.exchange import AnswerTail, ContextUsage, Route, open_exchange
from kirod.upstream.reasoning import sends_request_fields
from kirod.upstream.websearch import KIRO_TOOL, listed_tool

PROMPT: Final = "This is a connectivity check by kirod. Reply with the single word OK."
"""What both chats send: fixed, minimal, and never anything of the user's."""

CHAT_CREDITS: Final = 0.05
"""The most a minimal chat is expected to cost at rate multiplier 1.0. Kiro meters to a hundredth
of a credit, a short prompt costing less than one, scaled by the model's rate multiplier
(docs/UPSTREAM.md §8.1); a prompt this short is a few hundredths."""
MIN_CREDITS: Final = 0.01  # the least a request is metered (docs/UPSTREAM.md §8.1)
CHECK_TIMEOUT_S: Final = 20.0
CHAT_TIMEOUT_S: Final = 60.0
TOTAL_TIMEOUT_S: Final = 150.0
# The tail of a complete answer, in order (docs/KIRO-PROTOCOL.md §3.4).
TAIL: Final = ("metadataEvent", "contextUsageEvent", "meteringEvent")
# metadataEvent.tokenUsage's keys: the ones kirod reads, and the total it need not
# (docs/UPSTREAM.md §1.4).
TOKEN_USAGE_KEYS: Final = frozenset(
    {
        "uncachedInputTokens",
        "outputTokens",
        "cacheReadInputTokens",
        "cacheWriteInputTokens",
        "totalTokens",
    }
)
BELIEFS: Final = {"catalog": "ListAvailableModels answers with the fields and schemas kirod reads"}
NO_CHAT_MODEL: Final = "auto"  # Kiro picks the model behind it: nothing to check against
_PLAN: Final = re.compile(r"[A-Z][A-Z0-9 +_-]{0,39}")  # a plan's title: KIRO FREE, KIRO PRO+


def chat_credits(info: ModelInfo) -> float:
    """The most a minimal chat on `info` is expected to cost."""
    rate = 1.0 if info.rate_multiplier is None else info.rate_multiplier
    return max(MIN_CREDITS, round(rate * CHAT_CREDITS, 4))


def cheapest(catalog: ModelCatalog, takes: Callable[[ModelInfo], bool]) -> ModelInfo | None:
    """The model `takes` accepts with the lowest rate multiplier (the first listed of equals);
    None when none does, or none lists a multiplier."""
    priced = [
        info
        for info in catalog
        if info.rate_multiplier is not None and info.kiro_id != NO_CHAT_MODEL and takes(info)
    ]
    return min(priced, key=lambda info: info.rate_multiplier or 0.0, default=None)


def takes_effort(info: ModelInfo) -> bool:
    """Its catalog schema has an effort field (docs/KIRO-PROTOCOL.md §2.6)."""
    return info.request_fields is not None and info.request_fields.effort_key is not None


def _chat_request(model: ModelInfo, *, effort: bool) -> CanonicalRequest:
    reasoning = Reasoning(effort=model.efforts[0] if model.efforts else "low") if effort else None
    return CanonicalRequest(
        request_id=f"live-{secrets.token_hex(6)}",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model=model.kiro_id,
        messages=(Message(Role.USER, (TextBlock(PROMPT),)),),
        reasoning=reasoning,
        stream=True,
    )


@dataclass(frozen=True, slots=True)
class _Chat:
    """What one chat showed: its tail, context usage, whether it was cut, and how it failed."""

    tail: AnswerTail | None = None
    usage: ContextUsage | None = None
    cut: bool = False
    error: str | None = None  # the error event's code that ended it
    refused: UpstreamError | None = None  # Kiro's refusal before any output


def _failure(exc: BaseException) -> str:
    """An upstream failure in words and codes, never Kiro's text."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, UpstreamHttpError):
        reason = f" {drift.shape_value(exc.reason)}" if exc.reason else ""
        return f"{exc.status}{reason} ({exc.failure.value})"
    if isinstance(exc, UpstreamError):
        return exc.failure.value
    return type(exc).__name__


def _drift_facts(seen: Sequence[drift.Seen]) -> tuple[str, ...]:
    return tuple(
        f"{s.kind.value} at {s.where}: " + ", ".join(f"{k}={v}" for k, v in s.shape) for s in seen
    )


class LiveCheck:
    """Plans and runs the live checks (module docstring); one run at a time."""

    def __init__(
        self,
        accounts: AccountStore,
        keeper: TokenKeeper,
        client: KiroClient,
        models: ModelDirectory,
        maintenance: Maintenance,
    ) -> None:
        self._accounts = accounts
        self._keeper = keeper
        self._models = models
        self._kiro = _Kiro(client, models, maintenance)
        self._running = asyncio.Lock()

    async def plan(self, account_id: str | None) -> LivePlan:
        """What a run would do on the account (the first usable one when None), from its
        catalog as Kiro lists it now (no credits; the cached one if Kiro does not answer)."""
        record = await self._record(account_id)
        account = await self._fresh(record)
        try:
            catalog = await self._models.read_catalog(account)
        except UpstreamError:
            catalog = await self._models.catalog_for(account)
        return self._plan(record, catalog)

    async def run(
        self,
        account_id: str | None,
        *,
        model: str | None,
        effort_model: str | None,
        effort: bool = True,
    ) -> LiveReport:
        """Run the checks of the plan that named `model` and `effort_model` for its chats;
        `effort` False leaves the effort chat out. The catalog check's read makes the plan
        again: when its models moved since it was shown, nothing more is sent."""
        if self._running.locked():
            raise ControlConflict("busy", "a live check is already running; wait for it to end")
        async with self._running:
            record = await self._record(account_id)
            account = await self._fresh(record)
            started = time.time()
            run = _Run(self._kiro, account, effort=effort)
            try:
                async with asyncio.timeout(TOTAL_TIMEOUT_S):
                    catalog = await run.catalog() or await self._models.catalog_for(account)
                    plan = self._plan(record, catalog)
                    if (plan.model, plan.effort_model) != (model, effort_model):
                        raise ControlConflict(
                            "plan_changed",
                            "the account's catalog changed since the plan was shown: run the "
                            "check again to see the new plan",
                        )
                    await run.rest(plan, catalog)
            except TimeoutError:
                if run.plan is None:
                    run.plan = self._plan(record, await self._models.catalog_for(account))
                run.timed_out()
            assert run.plan is not None  # made before the checks after the catalog's
            return LiveReport(
                plan=run.plan,
                ran=True,
                beliefs=tuple(run.beliefs),
                credits=run.credits,
                started_at=started,
                duration_ms=round((time.time() - started) * 1000),
                version=__version__,
            )

    async def _record(self, account_id: str | None) -> AccountRecord:
        if account_id is not None:
            record = await self._accounts.get(account_id)
            if record is None:
                raise ControlNotFound("account")
            if record.status != "active":
                raise ControlConflict(
                    "account_unusable",
                    f"the account is {record.status}: a live check needs an account kirod can "
                    "use now (see `kiroctl accounts list`)",
                )
            return record
        for record in await self._accounts.list():
            if record.status == "active":
                return record
        raise ControlConflict(
            "no_usable_account",
            "no account is usable now: add one with `kiroctl accounts login`, or see "
            "`kiroctl accounts list` for why none is",
        )

    async def _fresh(self, record: AccountRecord) -> UpstreamAccount:
        try:
            return await self._keeper.fresh(to_upstream(record))
        except KirodError:
            raise ControlUpstreamFailed(
                "refresh_failed",
                "the account's token could not be refreshed, so nothing was checked",
            ) from None

    def _plan(self, record: AccountRecord, catalog: ModelCatalog) -> LivePlan:
        chat = cheapest(catalog, lambda info: True)
        effort = cheapest(catalog, takes_effort)
        quoted = f'"{PROMPT}"'
        steps = [
            LiveStep("catalog", BELIEFS["catalog"], "ListAvailableModels", 0.0),
            LiveStep(
                "usage",
                "getUsageLimits answers as kirod reads it",
                "getUsageLimits",
                0.0,
            ),
            LiveStep(
                "profiles",
                "Kiro lists the profile kirod uses for the account",
                "ListAvailableProfiles (GetProfile for an API key)",
                0.0,
            ),
            LiveStep(
                "web_search",
                f"Kiro's MCP lists the {KIRO_TOOL} tool kirod calls, taking a query",
                "MCP tools/list (nothing is searched)",
                0.0,
            ),
        ]
        if chat is not None:
            steps.append(
                LiveStep(
                    "chat",
                    f"a streamed chat on {chat.kiro_id} ends with its tail frames, a tokenUsage "
                    "kirod reads, and its credits metered",
                    f"one chat on {chat.kiro_id} (rate {chat.rate_multiplier:g}): {quoted}",
                    chat_credits(chat),
                )
            )
        if effort is not None:
            steps.append(
                LiveStep(
                    "effort",
                    f"{effort.kiro_id} takes its effort in the root additionalModelRequestFields",
                    f"one more chat on {effort.kiro_id} (rate {effort.rate_multiplier:g}), effort "
                    f"{effort.efforts[0] if effort.efforts else 'low'} in the root field: "
                    f"{quoted}",
                    chat_credits(effort),
                    optional=True,
                )
            )
        if chat is not None:
            steps.append(
                LiveStep(
                    "window",
                    f"Kiro's context percentage on {chat.kiro_id} is of the window kirod uses",
                    "nothing more: read from the chat's context percentage",
                    0.0,
                )
            )
        return LivePlan(
            account_id=record.id,
            account_label=record.label,
            model=None if chat is None else chat.kiro_id,
            rate_multiplier=None if chat is None else chat.rate_multiplier,
            effort_model=None if effort is None else effort.kiro_id,
            prompt=PROMPT,
            steps=tuple(steps),
        )


@dataclass(frozen=True, slots=True)
class _Kiro:
    """What the checks reach Kiro through: the machinery that serves requests."""

    client: KiroClient
    models: ModelDirectory
    maintenance: Maintenance


class _Run:
    """One run's checks, in order, and the beliefs they gave."""

    def __init__(self, kiro: _Kiro, account: UpstreamAccount, *, effort: bool) -> None:
        self._kiro = kiro
        self._account = account
        self._effort = effort
        self._steps: dict[str, LiveStep] = {}
        self._catalog: ModelCatalog | None = None
        self._chat: _Chat | None = None
        self.plan: LivePlan | None = None
        self.beliefs: list[Belief] = []
        self.credits: float | None = None

    async def catalog(self) -> ModelCatalog | None:
        """The catalog check, first: its read is the plan's too (None: Kiro did not answer)."""
        await self._checked("catalog", self._catalog_check)
        return self._catalog

    async def rest(self, plan: LivePlan, catalog: ModelCatalog) -> None:
        """The other checks, on `plan` made from `catalog` (the cached one if Kiro did not
        answer the catalog check)."""
        self.plan = plan
        self._catalog = catalog
        self._steps = {step.name: step for step in plan.steps}
        for name, check in (
            ("usage", self._usage_check),
            ("profiles", self._profiles_check),
            ("web_search", self._search_check),
            ("chat", self._chat_check),
            ("effort", self._effort_check),
            ("window", self._window_check),
        ):
            if name in self._steps:
                await self._checked(name, check)

    def timed_out(self) -> None:
        """The run ran out of time: every check not done is unknown."""
        done = {belief.name for belief in self.beliefs}
        self._steps = {step.name: step for step in self._planned().steps}
        for step in self._planned().steps:
            if step.name not in done:
                self._say(
                    step.name, "unknown", f"not run: the checks took over {TOTAL_TIMEOUT_S:g} s"
                )

    def _say(self, name: str, verdict: Verdict, why: str, seen: Sequence[drift.Seen] = ()) -> None:
        facts = _drift_facts(seen)
        if seen:
            more = f" and {len(facts) - 1} more" if len(facts) > 1 else ""
            why = f"Kiro answered in a way kirod does not know ({facts[0]}{more}); {why}"
            verdict = "contradicted"
        belief = self._steps[name].belief if name in self._steps else BELIEFS[name]
        self.beliefs.append(Belief(name, belief, verdict, why, facts))

    async def _checked(
        self, name: str, check: Callable[[], Awaitable[tuple[Verdict, str]]]
    ) -> None:
        timeout = CHAT_TIMEOUT_S if name in ("chat", "effort") else CHECK_TIMEOUT_S
        with drift.watching() as seen:
            try:
                async with asyncio.timeout(timeout):
                    verdict, why = await check()
            except (TimeoutError, KirodError) as exc:
                verdict, why = "unknown", f"Kiro did not answer as asked: {_failure(exc)}"
        self._say(name, verdict, why, seen)

    async def _catalog_check(self) -> tuple[Verdict, str]:
        try:
            catalog = await self._kiro.models.read_catalog(self._account)
        except UpstreamError as exc:
            return "unknown", f"ListAvailableModels failed: {_failure(exc)}"
        self._catalog = catalog
        if catalog is STATIC_CATALOG:
            return "contradicted", "ListAvailableModels listed no model kirod could read"
        schemas = sum(info.request_fields is not None for info in catalog)
        priced = sum(info.rate_multiplier is not None for info in catalog)
        return (
            "confirmed",
            f"{len(catalog)} models, {schemas} with a request schema, {priced} with a rate "
            "multiplier",
        )

    async def _usage_check(self) -> tuple[Verdict, str]:
        try:
            record = await self._kiro.maintenance.probe_usage(self._account.id)
        except UpstreamProtocolError:
            return "contradicted", "getUsageLimits answered without the usage entry kirod reads"
        except UpstreamError as exc:
            return "unknown", f"getUsageLimits failed: {_failure(exc)}"
        usage = None if record is None else record.usage
        if not usage:
            return "unknown", "the account went away during the check"
        title = usage.get("subscription")
        plan = title if isinstance(title, str) and _PLAN.fullmatch(title) else "a plan"
        reset = "a reset date" if usage.get("resets_at") else "no reset date"
        return "confirmed", f"answered and read: {plan}, its credits, {reset}"

    async def _profiles_check(self) -> tuple[Verdict, str]:
        account = self._account
        found = await discover(self._kiro.client, account)
        if not found.answered:
            return "unknown", "no region answered the profile listing"
        if account.profile_arn is None:
            if len(found.profiles) == 1:
                return "confirmed", "one profile listed, the one kirod would use"
            return "contradicted", f"{len(found.profiles)} profiles listed and none in use"
        if account.profile_arn in found.profiles:
            return "confirmed", f"the profile in use is listed ({len(found.profiles)} in all)"
        return (
            "contradicted",
            f"the profile in use is not among the {len(found.profiles)} listed",
        )

    async def _search_check(self) -> tuple[Verdict, str]:
        tool = await listed_tool(self._kiro.client, self._account)
        if tool is None:
            return "contradicted", f"tools/list does not name {KIRO_TOOL}"
        schema = tool.get("inputSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict) or "query" not in properties:
            return "contradicted", f"{KIRO_TOOL} is listed without a query in its input schema"
        return "confirmed", f"{KIRO_TOOL} is listed, taking a query"

    async def _chat_on(self, model: ModelInfo, *, effort: bool) -> _Chat:
        """One chat on `model` through the exchange, read to its end."""
        kiro = self._kiro
        request = _chat_request(model, effort=effort)
        route = Route(
            account=self._account,
            model=model,
            model_name=model.kiro_id,
            conversation_id=secrets.token_hex(16),
            usage_window=kiro.models.windows.window(self._account.id, model.kiro_id),
        )
        try:
            async with open_exchange(kiro.client, request, route) as exchange:
                error: str | None = None
                async for batch in exchange.batches():
                    for event in batch:
                        if isinstance(event, ErrorEvent):
                            error = event.code or event.kind.name.lower()
                tail = exchange.tail
        except UpstreamError as exc:
            return _Chat(refused=exc)
        if tail is not None and tail.credits is not None:
            self.credits = round((self.credits or 0.0) + tail.credits, 6)
        return _Chat(tail, exchange.context_usage, exchange.cut, error)

    def _planned(self) -> LivePlan:
        assert self.plan is not None  # set before the checks that read it
        return self.plan

    def _model(self, kiro_id: str | None) -> ModelInfo | None:
        catalog = self._catalog
        if kiro_id is None or catalog is None:
            return None
        return catalog.get(kiro_id)

    async def _chat_check(self) -> tuple[Verdict, str]:
        model = self._model(self._planned().model)
        if model is None:
            return "unknown", "not sent: the catalog read now does not list the planned model"
        chat = self._chat = await self._chat_on(model, effort=False)
        if chat.refused is not None:
            return "unknown", f"Kiro refused the chat: {_failure(chat.refused)}"
        if chat.error is not None:
            return "unknown", f"the answer broke off ({chat.error})"
        tail = chat.tail
        if chat.cut or tail is None or not tail.events:
            return "contradicted", "the answer ended without its tail frames (a cut generation)"
        missing = [name for name in TAIL if name not in tail.events]
        if missing:
            return "contradicted", f"the tail came without {', '.join(missing)}"
        problems = []
        keys = tail.token_usage_keys
        if keys is not None and "uncachedInputTokens" not in keys:
            problems.append("tokenUsage without uncachedInputTokens")
        if keys is not None and (unread := sorted(set(keys) - TOKEN_USAGE_KEYS)):
            problems.append(f"tokenUsage keys kirod does not read: {', '.join(unread)}")
        planned = self._steps["chat"].credits
        if tail.credits is None:
            problems.append("meteringEvent carried no credits")
        elif tail.credits > planned:
            problems.append(f"{tail.credits:g} credits metered, above the {planned:g} planned")
        if problems:
            return "contradicted", "; ".join(problems)
        usage = "no tokenUsage (kirod estimates)" if keys is None else "tokenUsage read"
        return (
            "confirmed",
            f"tail {', '.join(tail.events)}; {usage}; {tail.credits:g} credits metered "
            f"(planned at most {planned:g})",
        )

    async def _effort_check(self) -> tuple[Verdict, str]:
        if not self._effort:
            return "unknown", "not sent: you left the effort chat out"
        if self._chat is not None and self._chat.refused is not None:
            # Kiro refused the first chat (a throttle's wait, say): a second would only add to it.
            return "unknown", "not sent: Kiro refused the first chat"
        model = self._model(self._planned().effort_model)
        if model is None:
            return "unknown", "not sent: the catalog read now does not list the planned model"
        if not sends_request_fields(_chat_request(model, effort=True), model):
            return (
                "unknown",
                f"not sent: kirod would put no root field in a chat on {model.kiro_id}",
            )
        remembered = not self._kiro.models.takes_request_fields(self._account.id, model.kiro_id)
        note = " (kirod already goes without it on this account)" if remembered else ""
        chat = await self._chat_on(model, effort=True)
        refused = chat.refused
        if isinstance(refused, UpstreamHttpError) and (
            refused.failure is Failure.REQUEST_FIELDS or refused.status == 400
        ):
            return "contradicted", f"Kiro refused the root field: {_failure(refused)}{note}"
        if refused is not None:
            return "unknown", f"Kiro refused the chat: {_failure(refused)}"
        if chat.error is not None or chat.cut:
            return "unknown", f"the answer did not end whole ({chat.error or 'cut'})"
        if chat.tail is not None and chat.tail.credits is not None:
            planned = self._steps["effort"].credits
            if chat.tail.credits > planned:
                return (
                    "contradicted",
                    f"taken, but {chat.tail.credits:g} credits metered, above the {planned:g} "
                    "planned",
                )
        return "confirmed", f"Kiro took the root field on {model.kiro_id}{note}"

    async def _window_check(self) -> tuple[Verdict, str]:
        model = self._model(self._planned().model)
        chat = self._chat
        if model is None or chat is None:
            return "unknown", "no chat to read a context percentage from"
        windows = self._kiro.models.windows
        learned = windows.window(self._account.id, model.kiro_id)
        in_use = learned or model.context_window
        source = "learned on this account" if learned else "listed"
        others = [
            f"{w.kiro_id} {w.window:,} (listed {w.listed:,})"
            for w in windows.learned()
            if w.account_id == self._account.id and w.window != w.listed
        ]
        also = f"; learned here: {', '.join(others)}" if others else ""
        usage = chat.usage
        if usage is None or usage.percentage <= 0:
            return "unknown", f"the chat carried no context percentage{also}"
        implied = usage.estimated_tokens * 100 / usage.percentage
        if implied > in_use * DISAGREEMENT:
            near = rounded(implied, model.context_window)
            return (
                "contradicted",
                f"the chat's {usage.percentage:g} % implies a window near {near:,}, not the "
                f"{in_use:,} kirod uses ({source}){also}",
            )
        if implied < in_use / DISAGREEMENT:
            return (
                "unknown",
                f"Kiro counted more than kirod's estimate of so short a prompt (its own prompt "
                f"weighs in); kirod uses {in_use:,} ({source}){also}",
            )
        return "confirmed", f"{usage.percentage:g} % of {in_use:,} ({source}){also}"

"""The account layer's services, built together from the settings (for the composition root)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kirod.accounts.affinity import AffinityMap
from kirod.accounts.maintenance import Maintenance, RetentionPolicy
from kirod.accounts.model_directory import CatalogCache, ModelDirectory
from kirod.accounts.pool import AccountPool
from kirod.accounts.probes import UsageProbes
from kirod.accounts.profiles import ProfileFinder
from kirod.accounts.strategy import Strategy
from kirod.accounts.tokens import TokenKeeper
from kirod.accounts.windows import WindowLearner
from kirod.budgets.budgets import Budgets
from kirod.budgets.limits import Limits
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.resolution import ModelPolicy
from kirod.config import Settings
from kirod.dispatch.cache import ResponseCache
from kirod.dispatch.extensions import NONE, Extensions
from kirod.dispatch.pipeline import Dispatcher, DispatchPolicy, StepsFor
from kirod.storage.accounts import AccountStore
from kirod.storage.affinity import AffinityStore
from kirod.storage.cache import CacheStore
from kirod.storage.db import Database
from kirod.storage.drift import DriftBook, DriftStore
from kirod.storage.oplog import OpLog
from kirod.storage.windows import WindowStore
from kirod.tasks import TaskOwner
from kirod.upstream.client import KiroClient
from kirod.upstream.exchange import Route
from kirod.upstream.step import Step
from kirod.upstream.truncation import TruncationRecovery
from kirod.upstream.websearch import WebSearchStep


@dataclass(frozen=True)
class AccountLayer:
    pool: AccountPool
    keeper: TokenKeeper
    models: ModelDirectory
    dispatcher: Dispatcher
    maintenance: Maintenance
    oplog: OpLog
    affinity: AffinityMap
    cache: ResponseCache
    drift: DriftBook
    budgets: Budgets

    async def close(self) -> None:
        """Write what the layer holds behind the request; after the drain, before the store."""
        await self.oplog.close()
        await self.drift.flush()
        await self.affinity.close()
        await self.cache.close()


def turn_steps(settings: Settings, client: KiroClient) -> StepsFor:
    """Which steps may add upstream exchanges to a request's turn (`kirod.upstream.turn`)."""

    def steps_for(request: CanonicalRequest, route: Route) -> Sequence[Step]:
        steps: list[Step] = []
        if request.web_search is not None and request.server_tools:
            steps.append(WebSearchStep(client, route.account, request.web_search))
        if settings.truncation_recovery and settings.tool_input_delivery == "complete":
            steps.append(TruncationRecovery())  # one continuation per request: a new step each
        return steps

    return steps_for


def build_account_layer(
    settings: Settings,
    db: Database,
    accounts: AccountStore,
    client: KiroClient,
    tasks: TaskOwner,
    *,
    affinity_secret: bytes,
    authorize: Callable[[str, ModelInfo], None] | None = None,
    extensions: Extensions = NONE,
    budgets: Budgets | None = None,
    key_limits: Callable[[str], Limits] | None = None,
) -> AccountLayer:
    """Wire pool, token keeper, probes, affinity, dispatcher and maintenance; start nothing.

    `tasks` owns token refreshes and usage probes; the caller starts `maintenance.run()`.
    """
    pool = AccountPool(
        accounts,
        concurrency=settings.account_inference_concurrency,
        strategy=Strategy(settings.account_selection_strategy),
        queue_timeout_s=settings.queue_timeout_s,
        breaker_threshold=settings.breaker_consecutive_failures,
        rpm=settings.account_rpm,
        min_interval_s=settings.account_min_interval_s,
    )
    keeper = TokenKeeper(accounts, client, tasks, settings.refresh_window_s)
    models = ModelDirectory(
        accounts,
        CatalogCache(client, tasks),
        keeper,
        ModelPolicy(
            aliases=dict(settings.model_aliases),
            fallback=settings.model_fallback,
            gemini_classes=dict(settings.gemini_models) if settings.enable_gemini_api else {},
        ),
        WindowLearner(WindowStore(db), drift=client.drift),
    )
    drift = DriftBook(client.drift, DriftStore(db))
    affinity = AffinityMap(AffinityStore(db), affinity_secret, ttl_s=settings.affinity_ttl_s)
    probes = UsageProbes(pool, client, keeper, tasks)
    finder = ProfileFinder(accounts, client, keeper)
    oplog = OpLog(db)
    budgets = budgets or Budgets()
    cache = ResponseCache(
        CacheStore(
            db, ttl_s=settings.response_cache_ttl_s, max_bytes=settings.response_cache_max_bytes
        )
    )
    dispatcher = Dispatcher(
        pool,
        client,
        keeper,
        models,
        affinity,
        probes,
        finder,
        oplog,
        policy=DispatchPolicy(
            max_account_attempts=settings.max_account_attempts,
            branch_timeout_s=settings.request_timeout_s,
            parameter_policy="error" if settings.parameter_policy == "error" else "drop",
            prompt_cache_points=settings.prompt_cache_points,
            max_body_bytes=settings.kiro_max_body_bytes,
            tool_delivery=settings.tool_input_delivery,
        ),
        authorize=authorize,
        steps=turn_steps(settings, client),
        extensions=extensions,
        cache=cache,
        budgets=budgets,
        key_limits=key_limits,
    )
    maintenance = Maintenance(
        pool,
        keeper,
        probes,
        affinity,
        oplog,
        models,
        finder,
        tasks,
        interval_s=settings.maintenance_interval_s,
        usage_refresh_interval_s=settings.usage_refresh_interval_s,
        refresh_window_s=settings.refresh_window_s,
        retention=RetentionPolicy(settings.oplog_retention_s, settings.oplog_max_rows),
        drift=drift,
    )
    return AccountLayer(
        pool, keeper, models, dispatcher, maintenance, oplog, affinity, cache, drift, budgets
    )

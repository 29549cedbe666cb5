"""What the control plane reports: the control API's documents, defined once for the daemon and
kiroctl alike.

Plain stdlib dataclasses, so that kiroctl can import them without the server stack, and a leaf
below every layer that builds a report (storage, the account layer, the control API, the
console). Each `to_json()` is the documented, stable shape that `kiroctl … --json` prints;
fields are only ever added. Times are epoch seconds; durations are named with their unit.

One module a concern: `status` (and `maintenance`, `pool`), `accounts` and `logins`, `keys`,
`stats` (and traffic), `trace` (and log lines), `models`, `settings` (config, extensions),
`alerts`, `cache`, `console`, `drift`, `doctor`, `database`, `budgets`. Their public types are
importable from here.
"""

from kirod.report_types.accounts import Account, Imported, Usage
from kirod.report_types.alerts import AlertDelivery, AlertTest
from kirod.report_types.budgets import Budget, Spend, SpendDay
from kirod.report_types.cache import CacheStats
from kirod.report_types.console import ConsoleLink
from kirod.report_types.database import DatabaseBackup, DatabaseCheck
from kirod.report_types.doctor import Doctor, Reach
from kirod.report_types.drift import Drift, DriftRecord, DriftSummary
from kirod.report_types.keys import ApiKey, CreatedKey
from kirod.report_types.logins import Login
from kirod.report_types.maintenance import Maintenance, MaintenanceResult
from kirod.report_types.models import (
    ClientModelRow,
    LearnedWindowRow,
    ModelRow,
    Models,
    Substitution,
)
from kirod.report_types.pool import PacedAccount, Pacing, Pool, PoolAccount
from kirod.report_types.settings import Config, ExtensionInfo, ExtensionList
from kirod.report_types.stats import (
    TRAFFIC_WINDOWS,
    CreditsDay,
    Percentiles,
    Stats,
    StatsGroup,
    Traffic,
    TrafficBucket,
)
from kirod.report_types.status import (
    ATTENTION_STATES,
    DEGRADED,
    DOWN,
    HEALTHY,
    AccountCounts,
    DaemonInfo,
    Listener,
    Status,
)
from kirod.report_types.trace import LogLines, Trace, TraceAttempt, TraceRequest

__all__ = [
    "ATTENTION_STATES",
    "DEGRADED",
    "DOWN",
    "HEALTHY",
    "TRAFFIC_WINDOWS",
    "Account",
    "AccountCounts",
    "AlertDelivery",
    "AlertTest",
    "ApiKey",
    "Budget",
    "CacheStats",
    "ClientModelRow",
    "Config",
    "ConsoleLink",
    "CreatedKey",
    "CreditsDay",
    "DaemonInfo",
    "DatabaseBackup",
    "DatabaseCheck",
    "Doctor",
    "Drift",
    "DriftRecord",
    "DriftSummary",
    "ExtensionInfo",
    "ExtensionList",
    "Imported",
    "LearnedWindowRow",
    "Listener",
    "LogLines",
    "Login",
    "Maintenance",
    "MaintenanceResult",
    "ModelRow",
    "Models",
    "PacedAccount",
    "Pacing",
    "Percentiles",
    "Pool",
    "PoolAccount",
    "Reach",
    "Spend",
    "SpendDay",
    "Stats",
    "StatsGroup",
    "Status",
    "Substitution",
    "Trace",
    "TraceAttempt",
    "TraceRequest",
    "Traffic",
    "TrafficBucket",
    "Usage",
]

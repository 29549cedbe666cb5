"""Settings: one declaration per option, loaded with precedence flag > env > file > default.

Each `Option` names its type, default, `KIROD_*` environment variable and help text; the daemon's
command-line flags, the man page and the example config are all derived from `OPTIONS`. Besides
`kirod.paths`, only this package reads the daemon's environment.

- `option`: what a declaration says (`Option`, `Kind`);
- `table/`: the declarations, one module per concern, and `OPTIONS`, their order;
- `values`: a raw value turned into its kind's type, or refused (`coerce`, `Webhook`);
- `settings`: `Settings`, the resolved values;
- `loading`: flag > environment > file > default, and the checks across options;
- `hosts`: loopback names, `Host` values, and which of them the listener answers to;
- `service_env`: what systemd, launchd and the desktop session say through the environment.
"""

from __future__ import annotations

from kirod.config.hosts import ApiHosts, is_loopback
from kirod.config.loading import (
    CONFIG_ENV,
    default_config_file,
    default_value,
    load_option,
    load_settings,
    unknown_env,
)
from kirod.config.option import Kind, Option
from kirod.config.service_env import ServiceEnv, load_service_env
from kirod.config.settings import Settings
from kirod.config.table import OPTIONS, OPTIONS_BY_NAME, REMOVED
from kirod.config.table.public_api import DEFAULT_PORT
from kirod.config.values import Webhook

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_PORT",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "REMOVED",
    "ApiHosts",
    "Kind",
    "Option",
    "ServiceEnv",
    "Settings",
    "Webhook",
    "default_config_file",
    "default_value",
    "is_loopback",
    "load_option",
    "load_service_env",
    "load_settings",
    "unknown_env",
]

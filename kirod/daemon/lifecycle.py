"""The composition root: build every service once, serve, and shut down in order.

Start: open-files limit → lock → store → API key → sockets → control and public apps → READY=1.
Stop (SIGTERM, SIGINT, SIGHUP, `kiroctl shutdown` or a compromised lock): STOPPING=1 → stop
accepting → drain in-flight requests up to `shutdown_drain_s` → cancel the rest → background
tasks (the accounts' maintenance loop, token refreshes, usage probes) → upstream client →
alerts (what is queued gets two seconds) → store → lock. SIGHUP reloads nothing: kirod's
settings are fixed for its lifetime, and a hang-up (the terminal that ran it closed) means stop,
so it drains exactly like SIGTERM. Each resource is
entered on one `AsyncExitStack`, so teardown runs in reverse and only for what started.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from kirod import __version__, log
from kirod.budgets.budgets import Budgets
from kirod.budgets.periods import first_day_of_month
from kirod.budgets.rates import SEED_ROWS
from kirod.config import ServiceEnv, Settings
from kirod.control.alerts import Alerts
from kirod.control.apikeys import ApiKeys
from kirod.control.database import DatabaseService
from kirod.control.doctor import DoctorReports
from kirod.control.drift import DriftReports
from kirod.control.live_check import LiveCheck
from kirod.control.logins import Logins
from kirod.control.registry import AccountRegistry
from kirod.control.reports import LayerReports
from kirod.control.spending import Spending
from kirod.credentials.importers import ImportLimits
from kirod.daemon.install_key import derive, load_or_create
from kirod.daemon.lock import Holder, InstanceLock, how_to_stop
from kirod.daemon.logging import LogTail
from kirod.daemon.logging import formatter as log_formatter
from kirod.daemon.notify import Notifier
from kirod.daemon.sockets import (
    CONTROL_MAX_CONNECTIONS,
    Acceptor,
    Served,
    bind_tcp,
    bind_unix,
    connection_cap,
    control_refusal,
    public_refusal,
    raise_open_files_limit,
    tcp_address,
)
from kirod.dispatch.builder import build_account_layer
from kirod.dispatch.extensions import load_extensions
from kirod.errors import DatabaseDamaged, StartupError
from kirod.http.app import Route, build_public_app
from kirod.http.auth import KeyGate
from kirod.http.connection import PublicConnections
from kirod.http.console.app import build_console_app, link, mount, served_hosts
from kirod.http.console.sessions import ConsoleSessions
from kirod.http.ingress import new_request_id
from kirod.http.services import Services
from kirod.localapi.control import Control
from kirod.localapi.server import build_control_app
from kirod.paths import ensure_private_dir, write_private
from kirod.protocols.anthropic import ThinkingSigner
from kirod.protocols.responses import ReasoningBox
from kirod.report_types import DaemonInfo, Listener
from kirod.storage.accounts import AccountStore
from kirod.storage.db import Database
from kirod.storage.keys import KeyStore, generate_key
from kirod.storage.responses import ResponseStore
from kirod.storage.spend import SpendStore
from kirod.tasks import TaskOwner
from kirod.upstream.client import ClientOptions, Endpoints, KiroClient

logger = logging.getLogger(__name__)

LOCK_CHECK_INTERVAL_S = 5.0
EXIT_OK = 0
EXIT_FAILURE = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
API_KEY_FALLBACK = "api-key"  # in the state dir, when api_key_file holds another instance's key


@dataclass
class StopRequest:
    """The first reason to stop wins; later signals join the shutdown already under way."""

    event: asyncio.Event
    code: int = EXIT_OK
    reason: str = ""

    def request(self, code: int, reason: str) -> None:
        if self.event.is_set():
            log.event(logger, "shutdown_in_progress", signal=reason)
            return
        self.code, self.reason = code, reason
        self.event.set()


def _write_new_private(path: Path, text: str) -> bool:
    """Create `path` (0600) holding `text`; False if something already exists there.

    Never truncates: an existing key file is another instance's (or the user's) key, which a
    store holds only as a digest, so overwriting it would lose that key for good.
    """
    try:
        write_private(path, text.encode())
    except FileExistsError:
        return False
    except OSError as exc:
        raise StartupError(f"cannot write the new API key to {path}: {exc.strerror}") from None
    return True


async def ensure_api_key(settings: Settings, keys: KeyStore, gate: KeyGate) -> Path | None:
    """Load the stored keys; with no key anywhere, create one and write it to a new 0600 file.

    The file is `api_key_file`, unless that already exists: a store with no key did not write
    it (another kirod on another state dir did, or the user), so the key goes to `api-key` in
    this state dir instead, and the log says so. If that exists too, kirod refuses to start.
    The file is written before the digest is stored. Returns the file written, if any.
    """
    await gate.reload()
    if not gate.empty:
        return None
    key = generate_key()
    ensure_private_dir(
        settings.api_key_file.parent,
        tighten=False,
        fix="set api_key_file to a path in another directory",
    )
    path = settings.api_key_file
    if not _write_new_private(path, key + "\n"):
        fallback = settings.state_dir / API_KEY_FALLBACK
        if fallback == path or not _write_new_private(fallback, key + "\n"):
            raise StartupError(
                f"this state dir ({settings.state_dir}) has no API key yet, but {path} already "
                f"exists and kirod never overwrites a key file; remove it if no kirod uses it, "
                f"or set api_key_file to a new path"
            )
        log.event(
            logger,
            "api_key_file_taken",
            level=logging.WARNING,
            path=str(path),
            written=str(fallback),
            hint="the existing file holds another instance's key; this instance's key is in "
            "the written file",
        )
        path = fallback
    await keys.insert("default", key)
    await gate.reload()
    # First start: one line with where everything is and what to do next.
    log.event(
        logger,
        "api_key_created",
        path=str(path),
        database=str(settings.state.database),
        control=str(settings.socket_path),
        next="add an account with `kiroctl accounts login` or `kiroctl accounts import`",
    )
    return path


async def _watch_lock(lock: InstanceLock, stop: StopRequest) -> None:
    while True:
        await asyncio.sleep(LOCK_CHECK_INTERVAL_S)
        if not lock.intact():
            log.event(
                logger, "single_instance_lock_compromised", level=logging.ERROR, path=str(lock.path)
            )
            stop.request(EXIT_FAILURE, "lock_compromised")
            return


async def _watchdog(notifier: Notifier, interval_s: float) -> None:
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval_s)


def _say_waiting(lock: InstanceLock, timeout_s: float) -> Callable[[Holder], None]:
    def waiting(holder: Holder) -> None:
        # A plain line, like the "cannot start" one: the person who just started kirod reads it.
        print(
            f"kirod: waiting for kirod (pid {holder.pid}) to release {lock.path} "
            f"(up to {timeout_s:g} s); to stop it: {holder.stop}",
            file=sys.stderr,
            flush=True,
        )

    return waiting


def _stop_command(service_env: ServiceEnv) -> str:
    """How to stop this process, as the lock file tells a second instance."""
    try:
        with open("/proc/self/cgroup") as handle:
            cgroup = handle.read(65536)
    except OSError:
        cgroup = ""
    launchd = service_env.launchd_label if os.getppid() == 1 else None
    return how_to_stop(
        os.getpid(),
        systemd=service_env.systemd,
        cgroup=cgroup,
        launchd_label=launchd,
        uid=os.getuid(),
    )


def _desktop(settings: Settings, service_env: ServiceEnv) -> str | None:
    """The desktop notifier alerts use, if `alerts_desktop` asks and there is a session."""
    if settings.alerts_desktop and service_env.desktop is None:
        log.event(
            logger,
            "desktop_alerts_off",
            level=logging.WARNING,
            why="no desktop session (DISPLAY, WAYLAND_DISPLAY and DBUS_SESSION_BUS_ADDRESS unset)",
        )
    return service_env.desktop if settings.alerts_desktop else None


async def _acquire_lock(lock: InstanceLock, timeout_s: float, stop: StopRequest) -> bool:
    """Wait for the lock, unless asked to stop meanwhile. Returns whether we hold it."""
    async with TaskOwner("startup") as tasks:
        # `awaited`: a failure to take the lock is raised below, not logged as a background one.
        acquire = tasks.spawn(
            lock.acquire(timeout_s, _say_waiting(lock, timeout_s)), name="lock", awaited=True
        )
        stopped = tasks.spawn(stop.event.wait(), name="stop")
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
    return acquire.done() and not acquire.cancelled() and acquire.result() is None


async def run(
    settings: Settings, service_env: ServiceEnv, extra_routes: tuple[Route, ...] = ()
) -> int:
    """Serve until a signal or a compromised lock; return the process exit code.

    `extra_routes` lets an embedding program (and the lifecycle tests) serve more public routes
    behind the same ingress and key gate.
    """
    loop = asyncio.get_running_loop()
    stop = StopRequest(asyncio.Event())
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.request, EXIT_OK, sig.name)
    notifier = Notifier()
    started = time.time()
    state = "starting"
    try:
        async with AsyncExitStack() as stack:
            tail = LogTail(log_formatter(settings.log_format))  # `kiroctl logs`
            logging.getLogger().addHandler(tail)
            stack.callback(logging.getLogger().removeHandler, tail)
            files_before, open_files = raise_open_files_limit()
            max_connections = connection_cap(settings.max_connections, open_files)
            if max_connections < settings.max_connections:
                log.event(
                    logger,
                    "max_connections_lowered",
                    level=logging.WARNING,
                    configured=settings.max_connections,
                    effective=max_connections,
                    open_files_limit=open_files,
                    hint="raise the hard open-files limit (LimitNOFILE=, ulimit -Hn)",
                )
            ensure_private_dir(settings.state_dir, fix="set state_dir to another directory")
            extensions = load_extensions(settings.extensions)  # a bad table stops the start
            if extensions:
                names = ",".join(item.name for item in extensions.loaded)
                log.event(logger, "extensions_loaded", names=names)
            lock = InstanceLock(settings.state.lock, _stop_command(service_env))
            notifier.status("waiting for the instance lock")
            if not await _acquire_lock(lock, settings.lock_timeout_s, stop):
                return stop.code
            stack.callback(lock.release)

            db = await stack.enter_async_context(Database(settings.state.database))
            accounts = AccountStore(db)
            alerts = await stack.enter_async_context(
                Alerts(settings.alerts_webhooks, desktop=_desktop(settings, service_env))
            )
            accounts.observe(alerts.changed)
            alerts.seed(await accounts.list())
            keys = KeyStore(db)
            gate = KeyGate(
                settings.api_keys,
                keys,
                keyless=settings.enable_ollama_api and settings.ollama_keyless_loopback,
            )
            await ensure_api_key(settings, keys, gate)
            client = await stack.enter_async_context(
                KiroClient(
                    Endpoints(
                        kiro=settings.kiro_endpoint,
                        auth=settings.kiro_auth_endpoint,
                        oidc=settings.oidc_endpoint,
                    ),
                    ClientOptions(
                        proxy_url=settings.proxy_url,
                        keep_alive=settings.upstream_keep_alive,
                        keep_alive_timeout_s=settings.upstream_keep_alive_timeout_s,
                        ca_file=settings.ca_file,
                        idle_timeout_s=settings.stream_idle_timeout_s,
                        request_timeout_s=settings.request_timeout_s,
                    ),
                )
            )

            unix = bind_unix(settings.socket_path)
            stack.callback(unix.close)
            tcp = bind_tcp(settings.host, settings.port)
            stack.callback(tcp.close)
            public_address = tcp_address(tcp)
            listeners = (
                Listener("tcp", public_address),
                Listener("unix", str(settings.socket_path)),
            )

            background = await stack.enter_async_context(TaskOwner("daemon"))
            install_key = load_or_create(settings.state.install_key)
            layer = build_account_layer(
                settings,
                db,
                accounts,
                client,
                background,
                affinity_secret=derive(install_key, "account-affinity"),
                authorize=gate.authorize_model,
                extensions=extensions,
                budgets=Budgets(on_crossed=alerts.budget_crossed),
                key_limits=gate.limits,
            )
            stack.push_async_callback(layer.close)  # after the drain, before the store
            await layer.models.windows.load()  # the windows learned before a restart
            spend = SpendStore(db)
            try:
                metered = await layer.oplog.metered(SEED_ROWS)
            except DatabaseDamaged:
                # Damage in the log is found after the start, as the growing tables' check
                # would find it: the store turned read-only and says so; the rates start afresh.
                metered = []
            layer.budgets.load(  # the month's spend and the rates learned before a restart
                await spend.since(first_day_of_month(time.time())),
                {key_id: gate.limits(key_id) for key_id in gate.key_ids},
                await accounts.list(),
                metered,
            )
            models, dispatcher = layer.models, layer.dispatcher

            def info() -> DaemonInfo:
                return DaemonInfo(
                    version=__version__,
                    pid=os.getpid(),
                    uptime_s=round(time.time() - started, 3),
                    state=state,
                    listeners=listeners,
                    lock_path=str(lock.path),
                    disk_full=str(db.path) if db.full else None,
                    skipped_writes=db.skipped_writes,
                    database_damaged=None if db.damaged is None else str(db.damaged),
                )

            spending = Spending(layer.oplog, layer.pool, spend, layer.budgets, gate.limits)
            port = tcp.getsockname()[1]
            console_hosts = served_hosts(settings, port)
            sessions = ConsoleSessions(settings.console_idle_s) if console_hosts else None
            control = Control(
                info=info,
                settings=settings,
                accounts=AccountRegistry(
                    layer.pool,
                    layer.maintenance,
                    client,
                    ImportLimits(settings.import_max_bytes, settings.import_timeout_s),
                    layer.budgets,
                ),
                keys=ApiKeys(keys, gate.reload, layer.budgets),
                models=models,
                logins=Logins(client, accounts, background, on_added=layer.maintenance.welcome),
                reports=LayerReports(layer.maintenance, layer.oplog, layer.pool),
                shutdown=lambda: stop.request(EXIT_OK, "kiroctl"),
                logs=lambda after, lines, max_bytes: tail.read(
                    after=after, lines=lines, max_bytes=max_bytes
                ),
                console_link=link(sessions, settings, port) if sessions else None,
                alerts=alerts,
                extensions=extensions,
                cache=layer.cache,
                drift=DriftReports(layer.drift),
                doctor=DoctorReports(settings, accounts, client, started),
                live=LiveCheck(accounts, layer.keeper, client, models, layer.maintenance),
                unreachable=client.outages.current,
                db=DatabaseService(db),
                spending=spending,
            )
            control_runner = web.AppRunner(
                build_control_app(control),
                handle_signals=False,
                access_log=None,
                shutdown_timeout=settings.shutdown_drain_s,
            )
            await control_runner.setup()
            stack.push_async_callback(control_runner.cleanup)
            assert control_runner.server is not None
            await stack.enter_async_context(
                Acceptor(
                    unix.sock,
                    Served(control_runner.server),
                    name="control",
                    limit=CONTROL_MAX_CONNECTIONS,
                    refusal=control_refusal,
                )
            )

            services = Services(
                settings=settings,
                db=db,
                accounts=accounts,
                gate=gate,
                dispatcher=dispatcher,
                models=models,
                signer=ThinkingSigner(derive(install_key, "anthropic-thinking-signature")),
                reasoning_box=ReasoningBox(derive(install_key, "responses-reasoning")),
                responses=ResponseStore(
                    db,
                    max_age_s=settings.responses_retention_s,
                    max_bytes=settings.responses_max_bytes,
                ),
                spending=spending,
                outages=client.outages,
            )
            public_app = build_public_app(services, extra_routes)
            if sessions is not None and console_hosts is not None:
                mount(
                    public_app,
                    build_console_app(control, sessions, hosts=console_hosts, port=port),
                )
            public_runner = web.AppRunner(
                public_app,
                handle_signals=False,
                access_log=None,
                shutdown_timeout=settings.shutdown_drain_s,
            )
            await public_runner.setup()
            stack.push_async_callback(public_runner.cleanup)
            assert public_runner.server is not None
            await stack.enter_async_context(
                Acceptor(
                    tcp,
                    PublicConnections(
                        public_runner.server,
                        first_byte_s=settings.client_first_byte_timeout_s,
                        header_s=settings.client_header_timeout_s,
                    ),
                    name="public",
                    limit=max_connections,
                    refusal=lambda: public_refusal(new_request_id()),
                )
            )

            background.spawn(_watch_lock(lock, stop), name="lock-watch")
            background.spawn(layer.maintenance.run(), name="maintenance")
            # What the start's check left out (kirod.storage.integrity), while serving.
            background.spawn(db.check_growing(), name="integrity")
            if service_env.watchdog_interval_s:
                background.spawn(
                    _watchdog(notifier, service_env.watchdog_interval_s), name="watchdog"
                )
            state = "serving"
            summary = f"serving on http://{public_address}; control socket {settings.socket_path}"
            log.event(
                logger,
                "ready",
                version=__version__,
                public=public_address,
                control=str(settings.socket_path),
                max_connections=max_connections,
                open_files_limit=open_files,
                open_files_limit_raised_from=files_before if files_before != open_files else None,
            )
            notifier.ready(summary)

            await stop.event.wait()
            state = "draining"
            notifier.stopping(f"draining ({stop.reason})")
            log.event(
                logger,
                "shutdown",
                reason=stop.reason,
                drain_s=settings.shutdown_drain_s,
            )
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    log.event(logger, "stopped", exit_code=stop.code)
    return stop.code

"""What every kiroctl command shares: the control socket, the consoles, one way to call kirod."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kirod.cli import exits, render

if TYPE_CHECKING:
    from rich.console import Console

    from kirod.localapi.client import ControlError, DaemonRelease, LocalClient

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@dataclass
class App:
    socket: Path
    release: DaemonRelease | None = None  # what kirod's last answer said of itself
    warned: bool = False  # whether this command said that kirod and kiroctl differ

    @cached_property
    def consoles(self) -> tuple[Console, Console]:
        """stdout's and stderr's, made on first use: a command that prints JSON never loads rich."""
        return render.consoles()

    @property
    def out(self) -> Console:
        return self.consoles[0]

    @property
    def err(self) -> Console:
        return self.consoles[1]

    def call(self, use: Callable[[LocalClient], T]) -> T:
        """`use(client)`, its control API calls' failures turned into `CliError`s with a hint:
        `app.call(lambda kirod: kirod.accounts())`."""
        # Imported here, with the report types, so that `kiroctl --help` does without both.
        from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient

        client = LocalClient(self.socket)
        try:
            result = use(client)
        except DaemonUnreachable as exc:
            raise exits.unreachable(exc, self.socket) from None
        except ControlError as exc:
            if exits.missing_route(exc):
                raise self._older(exc) from None
            if exc.status == 404 or exc.code == "bad_response":
                # A kirod of another revision without the route, or with another way to say so.
                found = self._mismatch(client.release)
                if found is not None:
                    raise found from None
            raise exits.refused(exc) from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # An answer of a shape this kiroctl does not read: say which release is older.
            raise self._unreadable(client.release or self.release, exc) from None
        finally:
            self.release = client.release or self.release
        self._warn_of_mismatch()
        return result

    def _mismatch(self, release: DaemonRelease | None) -> exits.CliError | None:
        """Which of kirod and this kiroctl is older and what to run, if they speak different
        revisions of the control API (docs/RELEASING.md §4)."""
        from kirod import __version__
        from kirod.localapi.client import API_REVISION

        if release is None or release.api == API_REVISION:
            return None
        running = release.version or self._running_version()
        return exits.mismatch(__version__, API_REVISION, running, release.api)

    def _unreadable(self, release: DaemonRelease | None, exc: Exception) -> exits.CliError:
        from kirod import __version__

        if self.warned:  # which release is older was said already
            return exits.unreadable(__version__, exc, told=True)
        return self._mismatch(release) or exits.unreadable(__version__, exc)

    def _warn_of_mismatch(self) -> None:
        """Once a command: when kirod speaks another revision of the control API than this
        kiroctl, which of them is older and what to run (docs/RELEASING.md §4)."""
        if self.warned:
            return
        found = self._mismatch(self.release)
        if found is not None:
            self.warned = True
            self.err.print(
                f"[bold yellow]kiroctl: warning:[/] {found.message}", markup=True, highlight=False
            )
            self.err.print(f"[dim]hint:[/] {found.hint}", markup=True, highlight=False)

    def _running_version(self) -> str | None:
        """The running kirod's version from its status, which every kirod's has; None if that
        cannot be read either."""
        from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient

        try:
            doc = LocalClient(self.socket).request("GET", "/status")
        except (ControlError, DaemonUnreachable):
            return None
        version = doc.get("version") if isinstance(doc, dict) else None
        return version if isinstance(version, str) else None

    def _older(self, exc: ControlError) -> exits.CliError:
        """kirod lacks a route this kiroctl calls: say which release runs, and to restart it."""
        from kirod import __version__

        route = exc.message.removeprefix(exits.MISSING_ROUTE).strip(": ").partition("?")[0]
        error = exits.older(__version__, self._running_version(), f"the control route {route}")
        if self.warned:  # what to run was said already, with which release is older
            error.hint = None
        return error


pass_app = click.make_pass_decorator(App)


def json_option(function: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print the answer as JSON, in the stable shape documented in kiroctl(1).",
    )(function)


MIN_PREFIX = 4  # a shorter prefix is too easily someone else's account or key


def matching(
    ref: str,
    items: list[T],
    *,
    names: Callable[[T], tuple[str, str]],
    what: str,
    show: Callable[[T], str],
    listing: str,
    plural: str | None = None,
) -> T:
    """The item `ref` names exactly, or the only one it is a prefix of (≥ MIN_PREFIX);
    `plural`: the plural of `what` where it is not `what` and an s."""
    exact = [item for item in items if ref in names(item)]
    if len(exact) == 1:
        return exact[0]
    folded = ref.casefold()
    matches = exact or [
        item for item in items if any(name.casefold().startswith(folded) for name in names(item))
    ]
    if not exact and matches and len(ref) < MIN_PREFIX:
        raise exits.CliError(
            exits.USAGE,
            f"{ref!r} is too short to name {article(what)} {what}",
            f"give its whole id or label, or at least {MIN_PREFIX} characters of one "
            f"(see `{listing}`)",
        )
    if not matches:
        raise exits.CliError(exits.NOT_FOUND, f"no {what} matches {ref!r}", f"see `{listing}`")
    if len(matches) > 1:
        shown = ", ".join(show(item) for item in matches)
        raise exits.CliError(
            exits.USAGE,
            f"{ref!r} matches several {plural or what + 's'}: {shown}",
            "give more characters of the id",
        )
    return matches[0]


def article(noun: str) -> str:
    """`a` or `an` before `noun` (the nouns kiroctl names: account, key, login)."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


def confirm(question: str, yes: bool) -> None:
    """Ask `question` on a terminal; off one, only --yes goes ahead."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise exits.CliError(
            exits.USAGE,
            "refusing to ask for confirmation: standard input is not a terminal",
            "add --yes to go ahead without asking",
        )
    if not click.confirm(question, default=False, err=True):
        raise exits.CliError(exits.FAILED, "nothing was changed", None)


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")

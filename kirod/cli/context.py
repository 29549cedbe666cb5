"""What every kiroctl command shares: the control socket, the consoles, one way to call kirod."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kirod.cli import exits, render

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    socket: Path

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

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """One control API call; failures become `CliError`s with a hint."""
        # Imported here, with the schema it brings, so that `kiroctl --help` does without both.
        from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient

        try:
            return LocalClient(self.socket).request(method, path, body, timeout=timeout)
        except DaemonUnreachable as exc:
            raise exits.unreachable(exc, self.socket) from None
        except ControlError as exc:
            raise exits.refused(exc) from None


pass_app = click.make_pass_decorator(App)


def json_option(function: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print the answer as JSON, in the stable shape documented in kiroctl(1).",
    )(function)

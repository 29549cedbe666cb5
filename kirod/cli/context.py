"""What every kiroctl command shares: the control socket, the consoles, one way to call kirod."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from kirod.cli import exits
from kirod.localapi.client import ControlError, DaemonUnreachable, LocalClient

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    socket: Path
    out: Console
    err: Console

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """One control API call; failures become `CliError`s with a hint."""
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

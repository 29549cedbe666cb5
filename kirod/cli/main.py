"""`kiroctl`, the root command group."""

from __future__ import annotations

import click

from kirod import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kiroctl")
def cli() -> None:
    """Manage the kirod daemon and its Kiro accounts."""


def main() -> None:
    cli()

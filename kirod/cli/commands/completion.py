"""`kiroctl completion SHELL`: the shell's completion script, from click's own machinery."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

COMPLETE_VAR = "_KIROCTL_COMPLETE"
SHELLS = ("bash", "fish", "zsh")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
    bash:  eval "$(kiroctl completion bash)"   in ~/.bashrc
    zsh:   eval "$(kiroctl completion zsh)"    in ~/.zshrc
    fish:  kiroctl completion fish > ~/.config/fish/completions/kiroctl.fish
    """
    cls = get_completion_class(shell)
    assert cls is not None  # every choice is a shell click supports
    root = ctx.find_root()
    script = cls(root.command, {}, root.info_name or "kiroctl", COMPLETE_VAR).source()
    click.echo(script)

"""The man pages, the example config and the packaging templates follow the code they describe."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from kirod import __version__
from kirod.cli import exits
from kirod.cli.main import cli
from kirod.config import OPTIONS, Option, load_settings

ROOT = Path(__file__).parents[2]


def roff(name: str) -> str:
    """A man page's text with the escapes that can split a word removed."""
    text = (ROOT / "man" / name).read_text()
    return re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-")


def subcommand(group: click.Group, name: str) -> click.Command:
    command = group.get_command(click.Context(group), name)
    assert command is not None
    return command


def commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            yield from commands(subcommand(command, name), (*path, name))
    else:
        yield path


def command_at(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = subcommand(command, name)
    return command


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_every_option_is_documented(option: Option) -> None:
    toml_page = roff("kirod.toml.5")
    assert f".B {option.name}\n" in toml_page
    assert f".BR {option.env} ." in toml_page
    assert option.flag in roff("kirod.8")
    assert f"# {option.name} = " in (ROOT / "contrib" / "kirod.toml").read_text()


@pytest.mark.parametrize("path", list(commands(cli)), ids=" ".join)
def test_every_kiroctl_command_and_option_is_documented(path: tuple[str, ...]) -> None:
    page = roff("kiroctl.1")
    assert f"kiroctl {' '.join(path)}" in page
    for param in command_at(path).params:
        if isinstance(param, click.Option) and not param.hidden:
            for opt in param.opts:
                if opt != "--help":
                    assert opt in page, f"{opt} of kiroctl {' '.join(path)}"


def test_every_exit_code_is_documented() -> None:
    page = roff("kiroctl.1")
    status = page[page.index(".SH EXIT STATUS") : page.index(".SH ENVIRONMENT")]
    codes = {
        value for name, value in vars(exits).items() if name.isupper() and isinstance(value, int)
    }
    assert codes == {int(code) for code in re.findall(r"^\.B (\d+)$", status, re.MULTILINE)}


def test_the_example_config_sets_every_option_validly(tmp_path: Path) -> None:
    lines = (ROOT / "contrib" / "kirod.toml").read_text().splitlines()
    settings = [line[2:] for line in lines if re.match(r"# [a-z_]+ = ", line)]
    config = tmp_path / "config.toml"
    config.write_text("\n".join(settings) + "\n")
    assert set(tomllib.loads(config.read_text())) == {option.name for option in OPTIONS}
    load_settings(env={"HOME": str(tmp_path)}, config_path=config)


def test_packaging_templates_name_this_version_and_every_dependency() -> None:
    pkgbuild = (ROOT / "packaging" / "arch" / "PKGBUILD").read_text()
    assert f"\npkgver={__version__}\n" in pkgbuild
    formula = (ROOT / "packaging" / "homebrew" / "kirod.rb").read_text()
    assert f"/kirod-{__version__}.tar.gz" in formula
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert name is not None
        assert f"'python-{name[0].lower()}'" in pkgbuild
        assert name[0].lower() in formula


def test_completion_help_and_man_page_give_the_install_lines() -> None:
    from click.testing import CliRunner

    shown = CliRunner().invoke(cli, ["completion", "--help"]).stdout
    page = roff("kiroctl.1")
    for line in (
        'eval "$(kiroctl completion bash)"',
        'eval "$(kiroctl completion zsh)"',
        "kiroctl completion fish > ~/.config/fish/completions/kiroctl.fish",
    ):
        assert line in shown
        assert line in page

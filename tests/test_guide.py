"""What the user guide (docs/guide/) and the README show works as shown.

Each page, the README included: every link reaches a file and a heading; every TOML block for
kirod loads through kirod's own config reader, values checked (Codex's `config.toml` is the
client's: tests/cli/test_cli_demo.py runs it); every JSON block parses; every `kiroctl` command
line of a shell block parses with kiroctl's own parser, and every `kiroctl …` in the text names
commands and options that exist; every `kirod --flag` parses with the daemon's parser and its
value loads; every `KIROD_*` variable is one kirod reads; every `make` target is the Makefile's.
The configuration page documents every option. The clients' own settings are run by the client
tests (tests/clients/guide_snippets.py) and the README's table of them by tests/test_readme.py.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import click
import pytest

from kirod.cli.main import cli
from kirod.config import OPTIONS, load_settings
from kirod.daemon.main import build_parser
from kirod.dispatch.extensions import GROUP, load_extensions
from tests.support.examples import Redactor, Watermark

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide"
PAGES = [ROOT / "README.md", *sorted(GUIDE.glob("*.md"))]
PAGE_IDS = [str(page.relative_to(ROOT)) for page in PAGES]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")
SPAN = re.compile(r"`(?P<code>[^`]+)`")
VARIABLES = {option.env for option in OPTIONS} | {"KIROD_CONFIG", "KIROD_API_KEY"}
"""What kirod reads from the environment, and the variable the guide keeps a key in."""
CODEX_TABLE = "[model_providers."
"""A TOML block holding this is Codex's config.toml, not kirod's."""
EXAMPLES = {
    name: EntryPoint(name, f"{cls.__module__}:{cls.__name__}", GROUP)
    for name, cls in (("redactor", Redactor), ("watermark", Watermark))
}
"""The extensions of contrib/extensions, which the guide enables, as installed."""


def blocks(page: Path, *langs: str) -> list[str]:
    """The fenced blocks of `page` in one of `langs`, unindented (a block may sit in a list)."""
    return [
        textwrap.dedent(match["body"])
        for match in FENCE.finditer(page.read_text())
        if match["lang"] in langs
    ]


def prose(page: Path) -> str:
    """`page` without its fenced blocks."""
    return FENCE.sub("", page.read_text())


def spans(page: Path) -> list[str]:
    """The inline code of `page`'s text, a span wrapped over lines joined with spaces."""
    return [" ".join(match["code"].split()) for match in SPAN.finditer(prose(page))]


def anchors(page: Path) -> set[str]:
    """The anchors a forge gives `page`'s headings (GitHub's rule; a repeat gets `-1`, …)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(f"{slug}-{count}" if count else slug)
    return found


def settings_env(tmp_path: Path) -> dict[str, str]:
    """An environment with no setting of the user's: a home, config and runtime of its own."""
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def kiroctl_command(words: list[str]) -> tuple[click.Command, click.Context, list[str]]:
    """The kiroctl command `words` (after `kiroctl`) name, its context, and the words after."""
    command: click.Command = cli
    context = click.Context(cli, info_name="kiroctl")
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(context, words[0])
        if sub is None:
            break
        context = click.Context(sub, parent=context, info_name=words[0])
        command, words = sub, words[1:]
    return command, context, words


def kiroctl_lines() -> Iterator[tuple[str, str]]:
    """(page, line) for each `kiroctl` command of the pages' shell blocks, as typed."""
    for page, page_id in zip(PAGES, PAGE_IDS, strict=True):
        for block in blocks(page, "sh"):
            for line in block.splitlines():
                if line.startswith("kiroctl "):
                    yield page_id, line


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_link_reaches_a_file_and_a_heading(page: Path) -> None:
    for match in LINK.finditer(prose(page)):
        target = match["target"]
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not the repository's to check
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_file(), f"{page.name}: {target} leads to no file"
        if anchor:
            assert anchor in anchors(file), f"{page.name}: {target} leads to no heading"


def test_every_guide_page_is_linked_from_the_readme_and_the_index() -> None:
    readme = (ROOT / "README.md").read_text()
    index = (GUIDE / "README.md").read_text()
    for page in GUIDE.glob("*.md"):
        assert f"](docs/guide/{page.name}" in readme, page.name
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name


def test_every_option_is_in_the_configuration_table() -> None:
    table = (GUIDE / "configuration.md").read_text().split("\n## Every option\n", 1)[1]
    table = table.split("\n## ", 1)[0]
    missing = [option.name for option in OPTIONS if f"| `{option.name}` |" not in table]
    assert not missing, f"the guide's configuration table lacks {missing}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_kirod_toml_block_loads_as_written(page: Path, tmp_path: Path) -> None:
    """Loaded as a config file, as kirod loads one: unknown keys and bad values are refused;
    the extensions it enables load with their options (the examples of contrib/extensions)."""
    for number, block in enumerate(blocks(page, "toml")):
        if CODEX_TABLE in block:
            continue
        config = tmp_path / f"block-{number}.toml"
        config.write_text(block)
        settings = load_settings(env=settings_env(tmp_path), config_path=config, platform="linux")
        load_extensions(settings.extensions, EXAMPLES)


def test_the_pages_show_kirod_toml_blocks() -> None:
    """The check above has blocks to check: the settings of every page that shows some."""
    shown = {page.name for page in PAGES if any(CODEX_TABLE not in b for b in blocks(page, "toml"))}
    assert shown >= {
        "README.md",
        "configuration.md",
        "client-settings.md",
        "extensions.md",
        "service.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_json_block_parses(page: Path) -> None:
    for block in blocks(page, "json"):
        json.loads(block)


@pytest.mark.parametrize(("page", "line"), list(kiroctl_lines()))
def test_every_kiroctl_command_of_a_shell_block_parses(page: str, line: str) -> None:
    """Parsed by kiroctl's own parser: its commands, options, arguments and their types."""
    words = shlex.split(re.split(r"\s[<>|]\s", line, maxsplit=1)[0], comments=True)
    command, context, rest = kiroctl_command(words[1:])
    assert not isinstance(command, click.Group), f"{line}: names no command"
    command.make_context(context.info_name, rest, parent=context.parent)


def test_the_shell_blocks_show_kiroctl_commands() -> None:
    assert len(list(kiroctl_lines())) >= 20


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_kiroctl_command_in_the_text_exists(page: Path) -> None:
    """`kiroctl accounts set-budget ACCOUNT --allow-overage`: the commands, and each `--option`
    of the command named (placeholders are not parsed); `a|b` names each of a and b."""
    for span in spans(page):
        if not span.startswith("kiroctl "):
            continue
        command, context, rest = kiroctl_command(span.split()[1:])
        if isinstance(command, click.Group) and rest and "|" in rest[0]:
            for name in rest[0].split("|"):
                assert command.get_command(context, name), f"{span}: no {name!r}"
            continue
        options = {"--help"} | {
            name
            for parameter in [*command.params, *cli.params]
            for name in [*parameter.opts, *parameter.secondary_opts]
        }
        for word in rest:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in options, f"{span}: no option {word}"
            elif re.fullmatch(r"[a-z]+(?:-[a-z]+)*", word) and isinstance(command, click.Group):
                raise AssertionError(f"{span}: no command {word!r}")


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_kirod_flag_in_the_text_parses_and_loads(page: Path, tmp_path: Path) -> None:
    for span in spans(page):
        if not span.startswith("kirod --") or span == "kirod --help":
            continue
        arguments = vars(build_parser().parse_args(span.split()[1:]))
        flags = {name: value for name, value in arguments.items() if value is not None}
        load_settings(flags, env=settings_env(tmp_path), platform="linux")


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_kirod_variable_is_one_kirod_reads(page: Path) -> None:
    named = set(re.findall(r"\bKIROD_[A-Z_]+\b", page.read_text()))
    assert named <= VARIABLES, f"{page.name}: kirod reads no {sorted(named - VARIABLES)}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_make_target_is_the_makefiles(page: Path) -> None:
    makefile = (ROOT / "Makefile").read_text()
    commands = [span for span in spans(page) if span.startswith("make ")]
    commands += [
        line for block in blocks(page, "sh") for line in block.splitlines() if line[:5] == "make "
    ]
    for command in commands:
        target = command.split()[1]
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{page.name}: {command}"


def test_the_install_builds_the_clone_on_every_page() -> None:
    """Until kirod is on PyPI (tests/cli/test_cli_packaging.py builds the clone's wheel)."""
    for page in PAGES:
        installs = set(re.findall(r"^pipx install \S+", page.read_text(), re.M))
        assert installs <= {"pipx install ."}, page.name

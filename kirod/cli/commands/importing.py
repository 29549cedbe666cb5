"""`kiroctl accounts import`: upload credentials other Kiro tools saved, for kirod to parse.

kiroctl only reads files; kirod recognises and validates them. An SQLite store is uploaded as a
checkpointed copy made with SQLite's backup API, because a live store in WAL mode keeps recent
writes (fresh tokens) in its `-wal` file, which a plain copy of the main file would miss.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.localapi.client import LocalClient
from kirod.paths import credential_files
from kirod.report_types import Imported

SQLITE_MAGIC = b"SQLite format 3\x00"
AUTO_SOURCES = ("kiro-ide", "kiro-cli", "opencode-kiro-auth", "opencode-kiro-auth-legacy")
_CLIENT_ID_HASH = re.compile(r"[A-Za-z0-9_-]{1,128}")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise exits.CliError(exits.FAILED, f"no such file: {path}") from None
    except OSError as exc:
        raise exits.CliError(exits.FAILED, f"cannot read {path}: {exc.strerror}") from None


def sqlite_snapshot(path: Path) -> bytes:
    """A consistent copy of a (possibly live, WAL-mode) SQLite file, as bytes."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        source = sqlite3.connect(uri, uri=True)
        try:
            copy = sqlite3.connect(":memory:")
            try:
                source.backup(copy)
                return copy.serialize()
            finally:
                copy.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise exits.CliError(
            exits.FAILED,
            f"cannot copy the SQLite store {path}: {exc}",
            "close the tool that owns it if it holds an exclusive lock, then retry",
        ) from None


def _companion(path: Path, content: bytes) -> bytes | None:
    """An IdC kiro-auth-token.json names its client registration; it lives beside the token."""
    try:
        doc = json.loads(content)
    except ValueError:
        return None
    name = doc.get("clientIdHash") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not _CLIENT_ID_HASH.fullmatch(name):
        return None
    registration = path.parent / f"{name}.json"
    return _read(registration) if registration.is_file() else None


@dataclass(frozen=True)
class Upload:
    """What one import sends: a file (base64, with its IdC companion) or a Kiro API key."""

    content: str | None = None
    companion: str | None = None
    api_key: str | None = None

    def send(self, kirod: LocalClient, label: str | None) -> list[Imported]:
        return kirod.import_accounts(
            content=self.content, companion=self.companion, api_key=self.api_key, label=label
        )


def upload(path: Path, companion: Path | None) -> Upload:
    """The import of the file at `path`."""
    content = _read(path)
    if content.startswith(SQLITE_MAGIC):
        content = sqlite_snapshot(path)
        extra = None
    else:
        extra = _read(companion) if companion else _companion(path, content)
    return Upload(
        content=base64.b64encode(content).decode(),
        companion=None if extra is None else base64.b64encode(extra).decode(),
    )


def _found() -> list[Path]:
    locations = credential_files(Path.home())
    return [locations[name] for name in AUTO_SOURCES if locations[name].is_file()]


def _api_key() -> str:
    if sys.stdin.isatty():
        return str(click.prompt("Kiro API key (ksk_…)", hide_input=True)).strip()
    return sys.stdin.readline().strip()


@click.command("import")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--companion",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The {clientIdHash}.json client registration of an IdC kiro-auth-token.json "
    "[default: the one beside it].",
)
@click.option(
    "--api-key", is_flag=True, help="Import a Kiro API key (ksk_…), read from stdin or a prompt."
)
@click.option("--label", help="Name the imported account (one account only).")
@json_option
@pass_app
def import_(
    app: App,
    paths: tuple[Path, ...],
    companion: Path | None,
    api_key: bool,
    label: str | None,
    as_json: bool,
) -> None:
    """Import accounts from files other Kiro tools saved, or a Kiro API key.

    PATH may be Kiro IDE's kiro-auth-token.json, kiro-cli's data.sqlite3, or opencode-kiro-auth's
    kiro.db or kiro-accounts.json. Without PATH, each of them is looked for in its default place.
    """
    if api_key:
        if paths:
            raise exits.CliError(exits.USAGE, "give either --api-key or files, not both")
        bodies = [("API key", Upload(api_key=_api_key()))]
    else:
        sources = list(paths) or _found()
        if not sources:
            searched = ", ".join(str(credential_files(Path.home())[n]) for n in AUTO_SOURCES)
            raise exits.CliError(
                exits.FAILED,
                "found no Kiro credentials to import",
                f"looked for {searched}; give a file, or sign in with `kiroctl accounts login`",
            )
        if companion and len(sources) > 1:
            raise exits.CliError(exits.USAGE, "--companion goes with exactly one file")
        bodies = [(str(path), upload(path, companion)) for path in sources]
    if label and len(bodies) > 1:
        raise exits.CliError(exits.USAGE, "--label goes with exactly one file")
    imported: list[Imported] = []
    failures = 0
    for source, body in bodies:
        try:
            answer = app.call(partial(body.send, label=label or None))
        except exits.CliError as exc:
            if exc.code == exits.DOWN or len(bodies) == 1:
                raise
            failures += 1
            app.err.print(f"{source}: {exc.message}", style="yellow")
            continue
        imported.extend(answer)
        if not as_json:
            for item in answer:
                verb = "Imported" if item.created else "Updated"
                account = item.account
                app.out.print(
                    f"{verb} {account.label} ({render.short_id(account.id)}) from {source}"
                )
    if as_json:
        render.print_json({"accounts": [item.to_json() for item in imported]})
    if failures:
        raise exits.CliError(
            exits.FAILED, f"{failures} of {len(bodies)} imports failed", "see the messages above"
        )

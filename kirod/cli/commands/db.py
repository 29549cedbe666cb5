"""`kiroctl db …`: check, back up or recover kirod's database file.

`check` and `backup` go through the running kirod (its own file, on a connection of their own, so
it keeps serving); with no kirod running they work on the file directly. `recover` works only on
the file, with kirod stopped (kirod.storage.offline).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from kirod.cli import exits, render
from kirod.cli.context import App, json_option, pass_app
from kirod.paths import client_database_path

if TYPE_CHECKING:
    from kirod.localapi.client import LocalClient

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., object])

RECOVER_HINT = "run `kiroctl db recover` while kirod is stopped"
STOP_AND_RECOVER_HINT = "stop kirod (`kiroctl shutdown`), then run `kiroctl db recover`"


def database_option(function: F) -> F:
    return click.option(
        "--database",
        type=click.Path(path_type=Path, dir_okay=False),
        help="The database file to use directly, whether or not kirod runs [default: the one "
        "the running kirod uses; else kirod.db in KIROD_STATE_DIR, the config file's state_dir, "
        "or the default state dir].",
    )(function)


def _running(app: App, use: Callable[[LocalClient], T]) -> T | None:
    """`use` through the running kirod; None when no kirod answers."""
    try:
        return app.call(use)
    except exits.CliError as exc:
        if exc.code == exits.DOWN:
            return None
        raise


def _missing(path: Path) -> exits.CliError:
    return exits.CliError(
        exits.NOT_FOUND,
        f"there is no database at {path}",
        "give the file with --database, or set KIROD_STATE_DIR as kirod has it",
    )


@click.group()
def db() -> None:
    """Check, back up or recover kirod's database.

    kirod checks the file at every start and refuses a damaged one; damage found while it
    serves makes it read-only (`kiroctl status` says so). These commands are what to do next.
    """


@db.command()
@database_option
@json_option
@pass_app
def check(app: App, database: Path | None, as_json: bool) -> None:
    """Run SQLite's full integrity check of the database; exit 1 if it is damaged.

    It reads the whole file: seconds at the sizes retention allows. A running kirod runs it on
    its own file while it keeps serving, and goes read-only if the check finds damage.
    """
    answer = None if database else _running(app, lambda kirod: kirod.check_database())
    if answer is None:
        from kirod.storage.offline import check_file

        path = database or client_database_path()
        try:
            answer = check_file(path)
        except FileNotFoundError:
            raise _missing(path) from None
    if as_json:
        render.print_json(answer.to_json())
    elif answer.sound:
        app.out.print(f"{answer.path}: sound ({answer.seconds:.1f} s)")
    else:
        app.out.print(f"{answer.path}: damaged ({answer.seconds:.1f} s)", highlight=False)
        for problem in answer.problems:
            app.out.print(f"  {problem}", highlight=False, markup=False)
    if not answer.sound:
        hint = STOP_AND_RECOVER_HINT if answer.daemon else RECOVER_HINT
        raise exits.CliError(exits.FAILED, f"the database {answer.path} is damaged", hint)


@db.command()
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@database_option
@json_option
@pass_app
def backup(app: App, file: Path | None, database: Path | None, as_json: bool) -> None:
    """Copy the database into FILE with SQLite's online backup API, while kirod serves.

    FILE is new (an existing file is never overwritten), 0600; it defaults to
    kirod-YYYYMMDDTHHMMSSZ.db in the current directory. The copy is the store at one moment.
    """
    target = (file or Path(f"kirod-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.db")).absolute()
    answer = None if database else _running(app, lambda kirod: kirod.backup_database(str(target)))
    if answer is None:
        from kirod.storage.offline import backup_file

        path = database or client_database_path()
        try:
            answer = backup_file(path, target)
        except FileExistsError:
            raise exits.CliError(
                exits.FAILED, f"{target} exists", "give a new file name; kiroctl never overwrites"
            ) from None
        except FileNotFoundError:
            raise _missing(path) from None
        except OSError as exc:
            raise exits.CliError(
                exits.FAILED, f"cannot write {target}: {exc.strerror or exc}"
            ) from None
    if as_json:
        render.print_json(answer.to_json())
        return
    app.out.print(f"Backed up {answer.source} to {answer.path} ({answer.bytes} bytes).")


@db.command()
@database_option
@json_option
@pass_app
def recover(app: App, database: Path | None, as_json: bool) -> None:
    """Salvage a damaged database into a new file, with kirod stopped.

    Accounts and API keys first, then the rest: with SQLite's `.recover` (the sqlite3 command)
    where it is installed and works, else row by row. The new file has the current schema; the
    damaged one is kept beside it as kirod.db.damaged-YYYYMMDDTHHMMSSZ.
    """
    running = None if database else _running(app, lambda kirod: kirod.status())
    if running is not None:
        raise exits.CliError(
            exits.FAILED,
            f"kirod is running (pid {running.pid}); recovery needs the database to itself",
            "stop it with `kiroctl shutdown`, then run `kiroctl db recover` again",
        )
    from kirod.storage.offline import Busy, check_file, recover_file

    path = database or client_database_path()
    try:
        found = check_file(path)
    except FileNotFoundError:
        raise _missing(path) from None
    if found.sound:
        if as_json:
            render.print_json({"path": str(path), "sound": True})
        else:
            app.out.print(f"{path}: sound; nothing to recover.")
        return
    try:
        recovery = recover_file(path)
    except Busy as exc:
        raise exits.CliError(
            exits.FAILED,
            f"{exc}: kirod is starting or running on {path}",
            "stop it with `kiroctl shutdown`, then run `kiroctl db recover` again",
        ) from None
    if as_json:
        render.print_json(recovery.to_json())
    else:
        rows = ", ".join(f"{table} {count}" for table, count in recovery.rows.items())
        app.out.print(f"Recovered {path} ({recovery.method}); rows: {rows}.", highlight=False)
        if recovery.unreadable:
            unread = ", ".join(recovery.unreadable)
            app.out.print(f"Could not read: {unread}.", highlight=False)
        if recovery.damaged:
            lossy = ", ".join(recovery.damaged)
            app.out.print(f"Rows in damaged pages are lost from: {lossy}.", highlight=False)
        app.out.print(f"The damaged file is kept as {recovery.kept}.", highlight=False)
        app.out.print(f"Start kirod again: {exits.start_hint()}.", highlight=False, markup=False)
    lost = [t for t in ("accounts", "api_keys") if t in recovery.unreadable + recovery.damaged]
    if lost:
        steps = []
        if "accounts" in lost:
            steps.append("add the missing accounts again (`kiroctl accounts import` or `login`)")
        if "api_keys" in lost:
            steps.append(
                "create the missing API keys again (`kiroctl keys create`; with none left, kirod "
                "makes one at its next start and logs where)"
            )
        raise exits.CliError(
            exits.FAILED,
            f"some of the damaged file's {' and '.join(lost)} could not be read; the new file "
            "lacks them",
            f"{'; '.join(steps)}. The damaged file is kept as {recovery.kept}",
        )
    if recovery.problems:
        raise exits.CliError(
            exits.FAILED,
            f"the new file {path} fails the check: {recovery.problems[0]}",
            f"the damaged file is kept as {recovery.kept}",
        )

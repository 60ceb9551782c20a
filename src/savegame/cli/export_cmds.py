"""``savegame export`` and ``savegame import``: a run (or a thread) as one portable file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from savegame.cli import jsonview, render
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, StoreOption
from savegame.cli.words import plural
from savegame.maintenance import TransferReport


def _said(verb: str, report: TransferReport, path: Path) -> str:
    runs = ", ".join(report.run_ids)
    return (
        f"{verb} run{'' if len(report.run_ids) == 1 else 's'} {runs}: "
        f"{plural(report.checkpoints, 'checkpoint')}, "
        f"{plural(report.effects, 'journal entry', 'journal entries')}, "
        f"{plural(report.blobs, 'blob')} ({render.size(report.bytes)}, {path})"
    )


def export_command(
    ident: Annotated[
        str, typer.Argument(metavar="RUN|THREAD", help="A run id, or a thread id (all its runs).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="FILE", help="The file to write.")
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a run (or a thread) to one file: rows, checkpoints, journal, blobs, as stored.

    Encrypted records stay encrypted (no key needed). Load it with `savegame import`.
    """
    report = connected(store).export(ident, output)
    if as_json:
        jsonview.emit(jsonview.transfer(report, str(output)))
    else:
        render.console().print(_said("exported", report, output), highlight=False)


def import_command(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="A file `savegame export` wrote.")],
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread",
            metavar="THREAD",
            help="Import the runs into this (new) thread instead of their own.",
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Load an export file into a store; nothing is written unless the whole file checks.

    Encrypted exports are checked with the keys in $SAVEGAME_KEYS. A run id the
    store has already is refused, and so is a thread the store has (use --thread).
    """
    report = connected(store, create=True).import_run(path, thread=thread)
    if as_json:
        jsonview.emit(jsonview.transfer(report, str(path)))
    else:
        render.console().print(_said("imported", report, path), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
    app.command("import")(import_command)

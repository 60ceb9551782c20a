"""``savegame replay``: recorded runs re-executed against the code as it is now, nothing called."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from savegame.cli import jsonview, render, replay_view
from savegame.cli.app_dir import AppDirOption, importable
from savegame.cli.common import load_workflow
from savegame.cli.errors import Diverged
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, StoreOption
from savegame.cli.words import plural
from savegame.inspect import ReplayReport, replay_file
from savegame.runtime import as_workflow


def replay_command(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN|FILE",
            help="Export files (`savegame export`), folders of them, or run or thread ids "
            "of --store.",
        ),
    ],
    against: Annotated[
        list[str],
        typer.Option(
            "--against",
            metavar="MODULE:ATTR",
            help="The workflow or agent to replay with: module:attr or path/file.py:attr. "
            "Repeat it for runs of several workflows: each run replays with the one of its "
            "workflow's name. NAME=MODULE:ATTR replays the runs recorded under NAME (a "
            "workflow renamed since).",
        ),
    ],
    live: Annotated[
        bool,
        typer.Option(
            "--live-from-divergence",
            help="Where a run diverged, run it again with its calls after the first difference "
            "made for real (the model asked, the tools called), in the scratch store, and show "
            "where it ends.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
    app_dir: AppDirOption = None,
) -> None:
    """Replay recorded runs against the code: every model and tool call answered from the journal.

    Each run re-executes from its first checkpoint in a scratch memory store: nothing
    is called and nothing is written to --store. Prints, per run, identical or the first
    divergence (the step, the call's position, what the journal holds there and what
    the code asked, their difference) and the first checkpoint whose state differs.
    Exits 6 when a run diverged, so a CI job fails.
    """
    importable(app_dir)
    workflows = _workflows(against)
    files = [t for t in targets if Path(t).exists()]
    ids = [t for t in targets if not Path(t).exists()]
    runs = replay_file(files, against=workflows, live=live).runs if files else ()
    if ids:
        runs += connected(store).replay(ids, against=workflows, live=live).runs
    report = ReplayReport(runs)
    if as_json:
        jsonview.emit(replay_view.as_json(report))
    else:
        replay_view.show(render.console(), report)
    if not report.identical:
        raise Diverged(f"{plural(len(report.diverged), 'run')} diverged from the code")


def _workflows(refs: list[str]) -> list[Any] | dict[str, Any]:
    """Each reference loaded; with ``NAME=`` before any, a mapping from the recorded names."""
    if not any(_renamed(ref) for ref in refs):
        return [load_workflow(ref) for ref in refs]
    out: dict[str, Any] = {}
    for ref in refs:
        name, _, target = ref.rpartition("=") if _renamed(ref) else ("", "", ref)
        loaded = load_workflow(target)
        out[name or as_workflow(loaded).name] = loaded
    return out


def _renamed(ref: str) -> bool:
    # A reference's own text never holds "=" before its ":attr" (a module or a path).
    return "=" in ref.partition(":")[0]


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)

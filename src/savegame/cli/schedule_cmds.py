"""``savegame schedule add|list|remove|pause|resume``: workflows started on a cron.

Thin commands over :func:`savegame.client.schedule` and its siblings; workers
(``savegame worker``) fire the due occurrences, each once however many are up.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from savegame.cli import jsonview, render, schedule_view
from savegame.cli.common import parse_duration, parse_input
from savegame.cli.errors import Group
from savegame.cli.handles import connected
from savegame.cli.options import InputOption, JsonOption, StoreOption

schedule_app = typer.Typer(
    cls=Group,
    name="schedule",
    help="Start a workflow at each occurrence of a cron expression, on the worker fleet.",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The schedule's name.")]


@schedule_app.command("add")
def add_command(
    name: NameArg,
    flow: Annotated[
        str,
        typer.Argument(metavar="FLOW", help="The workflow: module:attr or path/file.py:attr."),
    ],
    cron: Annotated[
        str,
        typer.Option("--cron", metavar="EXPR", help='Five fields in UTC, e.g. "0 9 * * 1-5".'),
    ],
    input: InputOption = None,
    missed: Annotated[
        str,
        typer.Option(
            "--missed",
            metavar="latest|all|skip",
            help="Occurrences no worker saw in time: start the newest once, each, or none.",
        ),
    ] = "latest",
    catchup_window: Annotated[
        str,
        typer.Option(
            "--catchup-window",
            metavar="DURATION",
            help="How late an occurrence still starts as on time (30s, 5m, 1h).",
        ),
    ] = "60s",
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a schedule of that name.")
    ] = False,
    queue: Annotated[
        str | None,
        typer.Option("--queue", metavar="NAME", help="Put each run in this declared queue."),
    ] = None,
    priority: Annotated[
        int, typer.Option("--priority", help="Each run's priority in --queue.")
    ] = 0,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a schedule: workers start FLOW at each occurrence of --cron."""
    window = parse_duration(catchup_window, "--catchup-window", at_most=timedelta(days=366))
    s = connected(store, create=True).schedules.add(
        name,
        flow,
        cron=cron,
        input=parse_input(input),
        missed=missed,
        catchup_window=window.total_seconds() if window is not None else 60.0,
        replace=replace,
        queue=queue,
        priority=priority,
    )
    if as_json:
        jsonview.emit(schedule_view.as_json(s))
        return
    schedule_view.one(render.console(), s, "added")


@schedule_app.command("list")
def list_command(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the schedules: cron, next occurrence, runs started."""
    items = connected(store).schedules.list()
    if as_json:
        jsonview.emit_many(schedule_view.as_json(s) for s in items)
        return
    schedule_view.table(render.console(), items)


@schedule_app.command("remove")
def remove_command(name: NameArg, store: StoreOption = None) -> None:
    """Remove a schedule (the runs it started stay)."""
    connected(store).schedules.remove(name)
    render.console().print(f"schedule {name} removed", soft_wrap=True)


@schedule_app.command("pause")
def pause_command(name: NameArg, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Stop starting runs; occurrences until resume never start."""
    s = connected(store).schedules.pause(name)
    if as_json:
        jsonview.emit(schedule_view.as_json(s))
        return
    schedule_view.one(render.console(), s, "paused")


@schedule_app.command("resume")
def resume_command(name: NameArg, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Start runs again, from the next occurrence after now."""
    s = connected(store).schedules.resume(name)
    if as_json:
        jsonview.emit(schedule_view.as_json(s))
        return
    schedule_view.one(render.console(), s, "resumed")


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app)

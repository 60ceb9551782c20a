"""Starting and continuing a run here, in this process: ``savegame run``, ``savegame resume``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from savegame.cli.app_dir import AppDirOption, importable
from savegame.cli.common import finish, load_workflow, parse_input, parse_json, progress
from savegame.cli.errors import UsageError
from savegame.cli.handles import connected
from savegame.cli.options import (
    InputOption,
    JsonOption,
    OnExistsOption,
    OnThreadBusyOption,
    QuietOption,
    RunIdOption,
    StoreOption,
    ThreadOption,
)
from savegame.cli.starting import starting


def run_command(
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:ATTR", help="The workflow or agent: module:attr or path/file.py:attr."
        ),
    ],
    input_json: InputOption = None,
    thread: ThreadOption = None,
    run_id: RunIdOption = None,
    on_exists: OnExistsOption = "continue",
    on_thread_busy: OnThreadBusyOption = "reject",
    store: StoreOption = None,
    as_json: JsonOption = False,
    app_dir: AppDirOption = None,
    quiet: QuietOption = False,
) -> None:
    """Start a run of a workflow (or continue the one --run-id names) and drive it to its end."""
    importable(app_dir)
    state = parse_input(input_json)
    target = load_workflow(workflow)
    sg = connected(store, create=True)
    res = sg.run(
        target,
        state,
        thread_id=thread,
        run_id=run_id,
        observer=starting(progress(as_json or quiet), as_json or quiet),
        on_exists=on_exists,
        on_thread_busy=on_thread_busy,
    )
    finish(sg, res, as_json=as_json, verb="ended", store=store, quiet=quiet)


def resume_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to continue.")],
    value: Annotated[
        str | None,
        typer.Option(
            "--value", metavar="JSON", help="The answer to the run's pending interrupt, as JSON."
        ),
    ] = None,
    interrupt: Annotated[
        str | None,
        typer.Option("--interrupt", metavar="ID", help="Which pending interrupt --value answers."),
    ] = None,
    from_checkpoint: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="CHECKPOINT_ID",
            help="Continue from this checkpoint of the run instead of its latest "
            "(e.g. when `savegame verify` finds the latest damaged; see `savegame history`).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="A run waiting for a timer, an event or child runs: wait here until it is "
            "woken (and whenever it waits again) instead of refusing.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
    app_dir: AppDirOption = None,
    quiet: QuietOption = False,
) -> None:
    """Continue a run from its latest checkpoint (or an earlier one), in this process."""
    importable(app_dir)
    options: dict[str, Any] = {}
    if value is not None:
        options = {"value": parse_json(value, "--value"), "interrupt_id": interrupt}
    elif interrupt is not None:
        raise UsageError("--interrupt names the interrupt that --value answers: give --value too")
    sg = connected(store)
    res = sg.resume(
        run_id,
        observer=progress(as_json or quiet),
        from_checkpoint=from_checkpoint,
        wait=wait,
        **options,
    )
    finish(sg, res, as_json=as_json, verb="resumed and ended", store=store, quiet=quiet)


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
    app.command("resume")(resume_command)

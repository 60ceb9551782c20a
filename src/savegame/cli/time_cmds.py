"""Time travel: a thread's tree of runs, and forking a checkpoint (edited, replayed)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from savegame.cli import jsonview, render, time_view
from savegame.cli.common import finish, load_workflow, parse_json, parse_object, progress
from savegame.cli.errors import UsageError
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, QuietOption, StoreOption


def tree_command(
    ident: Annotated[
        str, typer.Argument(metavar="THREAD|RUN_ID", help="A thread, or any run of it.")
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Draw a thread's runs as a tree: which run each one forked from or continued, and where."""
    found = connected(store).tree(ident)
    if as_json:
        jsonview.emit(time_view.tree_json(found))
    else:
        time_view.tree(render.console(), found)


def _parse_set(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        path, eq, text = item.partition("=")
        if not eq or not path:
            raise UsageError(f"--set {item!r} must read PATH=JSON, e.g. order.amount=20")
        out[path] = parse_json(text, f"--set {path}")
    return out


def fork_command(
    checkpoint_id: Annotated[
        str, typer.Argument(metavar="CHECKPOINT_ID", help="Where the fork starts.")
    ],
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="PATH=JSON", help="Set a value inside the state (repeatable)."
        ),
    ] = None,
    update: Annotated[
        str | None, typer.Option("--update", metavar="JSON", help="State keys to replace.")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT", help="Why.")] = None,
    by: Annotated[
        str | None, typer.Option("--by", metavar="NAME", help="Who (default: user@host).")
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            metavar="replay|redo",
            help="replay (default): recorded calls come back from the journal until the "
            "first call that differs; redo: every call is made again.",
        ),
    ] = "replay",
    no_run: Annotated[
        bool, typer.Option("--no-run", help="Create the fork; `savegame resume` runs it.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before writes may run again.")
    ] = False,
    workflow: Annotated[
        str | None,
        typer.Option(
            "--workflow", metavar="MODULE:ATTR", help="Default: the run's stored reference."
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Start a new run of the thread from a checkpoint, optionally edited, replayed against the journal."""
    if mode not in ("replay", "redo"):
        raise UsageError(f"--mode must be replay or redo, not {mode!r}")
    paths = _parse_set(set_ or [])
    changes = None if update is None else parse_object(update, "--update", "state keys")
    sg = connected(store)
    plan = sg.plan_fork(checkpoint_id)
    out = render.console()
    asks = bool(plan.writes or plan.in_doubt) and not yes and not no_run
    if not as_json and (asks or not quiet):  # --quiet too shows what it asks about
        time_view.plan(out, plan, mode)
    if asks:
        if not sys.stdin.isatty():
            raise UsageError("recorded writes may run again: pass --yes to fork anyway")
        if not typer.confirm("fork?", default=False):
            raise typer.Exit(1)
    result = sg.fork(
        checkpoint_id, update=changes, set=paths, reason=reason, by=by, mode=mode,  # type: ignore[arg-type]
        run=not no_run, observer=progress(as_json or quiet),
        workflow=None if workflow is None else load_workflow(workflow),
    )  # fmt: skip
    if as_json:
        body = time_view.forked_json(result)
        body["result"] = None if result.result is None else jsonview.result(result.result)
        jsonview.emit(body)
        return
    if quiet:
        ended = result.result
        status = sg.get_run(result.run_id).status if ended is None else ended.status
        render.quiet(out, result.run_id, status)
        return
    time_view.forked(out, result, store)
    if result.result is not None:
        finish(sg, result.result, as_json=False, verb="forked and ended", store=store)


def register(app: typer.Typer) -> None:
    app.command("tree")(tree_command)
    app.command("fork")(fork_command)

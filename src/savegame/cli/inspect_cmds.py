"""Reading a store: ``savegame runs``, ``savegame history``, ``savegame show``.

A LangGraph thread's runs and checkpoints (``savegame migrate langgraph``, or
SavegameSaver) are shown as LangGraph names them.
"""

from __future__ import annotations

from typing import Annotated

import typer

import savegame
from savegame.cli import jsonview, langgraph_view, render, time_view
from savegame.cli.errors import UsageError
from savegame.cli.handles import connected
from savegame.cli.options import (
    MAX_ROWS,
    JsonOption,
    LangGraphThreadOption,
    LimitOption,
    StoreOption,
)
from savegame.integrations import langgraph
from savegame.model import RunStatus


def _parse_status(text: str | None) -> RunStatus | None:
    if text is None:
        return None
    try:
        return RunStatus(text)
    except ValueError:
        choices = ", ".join(s.value for s in RunStatus)
        raise UsageError(f"unknown status {text!r} (one of: {choices})") from None


def runs_command(
    thread: Annotated[
        str | None, typer.Option("--thread", metavar="THREAD", help="Only runs of this thread.")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs with this status (running, completed, ...).",
        ),
    ] = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first; a LangGraph thread's runs (one per namespace) as LangGraph sees them.

    A LangGraph run's status is its latest checkpoint's (interrupted while an interrupt()
    waits for an answer), here, in --json, for --status and in the UI alike. Runs savegame
    keeps for itself (a migration's marker per thread) are not listed. A queued or running
    run whose owner is gone (its process not running on this host, or its lease expired)
    says so, with the command that continues it.
    """
    sg = connected(store)
    items = langgraph.shown_runs(
        thread_id=thread, status=_parse_status(status), limit=limit, store=sg.store,
        storage=sg.storage,
    )  # fmt: skip
    infos = [shown.info for shown in items]
    gone = {i.run_id: dead for i in infos if (dead := savegame.client.owner_gone(i)) is not None}
    if as_json:
        jsonview.emit_many(
            {
                **langgraph_view.run_json(shown),
                "owner_gone": jsonview.owner_gone(
                    gone.get(shown.info.run_id), render.resume_command(shown.info.run_id, store)
                ),
            }
            for shown in items
        )
    elif any(shown.head is not None for shown in items):
        langgraph_view.runs(render.console(), items)
    else:
        render.runs(render.console(), infos, gone, store)


def history_command(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|THREAD", help="A run, or a LangGraph thread (its root namespace)."
        ),
    ],
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=MAX_ROWS, help="Show at most this many checkpoints."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a run's checkpoints, newest first; a checkpoint other runs started from shows them.

    A LangGraph run (or thread) lists LangGraph's checkpoint ids, steps and next nodes.
    """
    sg = connected(store)
    found = langgraph.line_history(run_id, limit=limit, store=sg.store, storage=sg.storage)
    if found is not None:
        line, rows = found
        if as_json:
            jsonview.emit(langgraph_view.history_json(rows))
        else:
            langgraph_view.history(render.console(), line, rows)
        return
    items = sg.history(run_id, limit=limit)
    # Forks are marked where they left: the runs started from each checkpoint.
    lineage = sg.tree(run_id)
    forks = {cp: [n.run_id for n in nodes] for cp, nodes in lineage.forks_at(run_id).items()}
    if as_json:
        jsonview.emit_many(
            {**jsonview.header(h), "forks": forks.get(h.checkpoint_id, [])} for h in items
        )
    else:
        out = render.console()
        render.history(out, run_id, items, forks)
        time_view.kin(out, lineage.node(run_id))


def show_command(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|CHECKPOINT_ID",
            help="A checkpoint, or a run (its latest checkpoint); a LangGraph thread, "
            "or a LangGraph checkpoint id.",
        ),
    ],
    thread: LangGraphThreadOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one checkpoint with its full state.

    A LangGraph checkpoint shows its channels, next nodes and pending writes.
    """
    sg = connected(store)
    found = langgraph.find_checkpoint(ident, thread=thread, store=sg.store, storage=sg.storage)
    if found is not None:
        if as_json:
            jsonview.emit(langgraph_view.checkpoint_json(found))
        else:
            langgraph_view.checkpoint(render.console(), found)
        return
    cp = sg.checkpoint(ident)
    if as_json:
        jsonview.emit(jsonview.checkpoint(cp))
    else:
        render.checkpoint(render.console(), cp)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs_command)
    app.command("history")(history_command)
    app.command("show")(show_command)

"""``savegame diff``: what changed between two checkpoints (or two runs at their heads)."""

from __future__ import annotations

from typing import Annotated

import typer

from savegame.cli import diff_view, jsonview, langgraph_view, render
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, LangGraphThreadOption, StoreOption
from savegame.integrations import langgraph

_IDENT = "A checkpoint id, or a run id (its latest checkpoint); or LangGraph's (a thread, a checkpoint id)."


def diff_command(
    a: Annotated[str, typer.Argument(metavar="A", help=_IDENT)],
    b: Annotated[str, typer.Argument(metavar="B", help=_IDENT)],
    context: Annotated[
        int,
        typer.Option(
            "--context",
            "-C",
            metavar="N",
            min=0,
            max=1000,
            help="Also show up to N unchanged siblings on each side of a change.",
        ),
    ] = 0,
    thread: LangGraphThreadOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what changed in the state from A to B: paths added, removed, changed; lists that grew.

    Two LangGraph checkpoints are compared channel by channel.
    """
    sg = connected(store)
    found = langgraph.diff_checkpoints(
        a, b, thread=thread, context=context, store=sg.store, storage=sg.storage
    )
    if found is not None:
        if as_json:
            jsonview.emit(langgraph_view.diff_json(found))
        else:
            langgraph_view.diff(render.console(), found)
        return
    result = sg.diff(a, b, context=context)
    if as_json:
        jsonview.emit(jsonview.diff(result))
    else:
        diff_view.diff(render.console(), result)


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_command)

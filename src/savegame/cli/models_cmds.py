"""``savegame models RUN``: a run's model calls (model, tokens, cost) and its per-model totals."""

from __future__ import annotations

from typing import Annotated

import typer

from savegame.cli import models_view, render
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, StoreOption

RunArg = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run.")]


def models_command(run_id: RunArg, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Show a run's model calls, oldest first, with tokens and cost, and the totals per model.

    A call replayed after a crash is in the journal once and counts once; a fork's calls
    answered from its origin's journal are marked reused and left out of the totals (the
    origin paid for them). An unknown price is shown as such, never guessed.
    """
    sg = connected(store)
    calls = sg.model_calls(run_id)
    usage = sg.model_usage(run_id)
    if as_json:
        models_view.emit(run_id, calls, usage)
    else:
        models_view.table(render.console(), run_id, calls, usage)


def register(app: typer.Typer) -> None:
    app.command("models")(models_command)

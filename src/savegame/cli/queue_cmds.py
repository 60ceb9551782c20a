"""Commands for queues with limits: ``savegame queues`` shows each queue's depth and running
counts; ``savegame queues declare NAME`` declares one (or changes its limits)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

import savegame
from savegame.cli import jsonview, render
from savegame.cli.errors import Group
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, StoreOption

queues_app = typer.Typer(
    cls=Group,
    help="Queues for the worker fleet: their limits, depth and running counts.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _limit(value: int | None) -> str:
    return "-" if value is None else str(value)


def queue_data(q: savegame.stores.QueueStats) -> dict[str, Any]:
    return {
        **q.queue.to_data(),
        "queued": q.queued,
        "running": q.running,
        "started_in_period": q.started,
        "unfinished": q.unfinished,
    }


@queues_app.callback()
def queues_command(
    ctx: typer.Context,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every declared queue: its limits, runs queued (depth), running, started in
    its rate window, and unfinished."""
    if ctx.invoked_subcommand is not None:
        return
    found = connected(store).queues.list()
    if as_json:
        jsonview.emit([queue_data(q) for q in found])
        return
    out = render.console()
    if not found:
        out.print("no queues declared: savegame queues declare NAME --concurrency N")
        return
    table = render.new_table("Queues")
    for column in ("queue", "queued", "running", "concurrency", "per worker", "rate"):
        table.add_column(column, justify="left" if column == "queue" else "right")
    for q in found:
        spec = q.queue
        rate = "-" if spec.limit is None else f"{q.started}/{spec.limit} per {spec.period:g}s"
        table.add_row(
            spec.name, str(q.queued), str(q.running), _limit(spec.concurrency),
            _limit(spec.worker_concurrency), rate,
        )  # fmt: skip
    out.print(table)


@queues_app.command("declare")
def declare_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The queue's name.")],
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="Runs of it executing at once, fleet-wide."),
    ] = None,
    worker_concurrency: Annotated[
        int | None,
        typer.Option("--worker-concurrency", min=1, help="Runs of it at once in one worker."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Starts per --period (a rate limit).")
    ] = None,
    period: Annotated[
        float, typer.Option("--period", min=0.001, help="The rate limit's window, in seconds.")
    ] = 1.0,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Declare a queue in the store, or change its limits (every worker sees them at once)."""
    queue = connected(store, create=True).queues.declare(
        name,
        concurrency=concurrency,
        worker_concurrency=worker_concurrency,
        limit=limit,
        period=period,
    )
    if as_json:
        jsonview.emit(queue.to_data())
        return
    render.console().print(f"queue {queue.name} declared", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(queues_app, name="queues")

"""``savegame send``: an event for a run waiting (or about to wait) in ``ctx.wait_for``.

A thin command over :func:`savegame.send`: a webhook handler or a script in any process
delivers a value to a run, exactly once per ``--key``; a woken run is continued by a
worker, or by ``savegame resume``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from savegame.cli import jsonview, render
from savegame.cli.common import parse_json
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, StoreOption
from savegame.cli.words import store_tail


def send_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to send to.")],
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="What the run waits for.")],
    value: Annotated[
        str, typer.Argument(metavar="JSON", help="The value `ctx.wait_for` returns, as JSON.")
    ],
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            metavar="KEY",
            help="Idempotency key: a second send with the same key (and topic) is dropped.",
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", metavar="NAME", help="Who sends it (default: user@host)."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send an event to a run: its `ctx.wait_for(TOPIC)` returns the value, once."""
    sent = connected(store).send(run_id, topic, parse_json(value, "JSON"), key=key, by=by)
    if as_json:
        jsonview.emit(
            {
                "run_id": sent.run_id,
                "topic": sent.topic,
                "request_id": sent.request_id,
                "delivered": sent.delivered,
                "sent_at": sent.sent_at,
                "woken": sent.woken,
            }
        )
        return
    out = render.console()
    tail = store_tail(store)
    if not sent.delivered:
        out.print(
            Text.assemble(
                ("dropped: ", "yellow"),
                f"an event with key {key!r} on {topic!r} was sent to run {run_id} "
                f"before (at {sent.sent_at.isoformat()}): it stands",
            ),
            soft_wrap=True,
        )
        return
    out.print(f"sent {topic!r} to run {run_id} ({sent.request_id})", soft_wrap=True)
    if sent.woken:
        out.print(
            f"  the run is woken: a worker continues it, or `savegame resume {run_id}{tail}`",
            soft_wrap=True,
        )
    else:
        out.print(f"  kept: the run takes it when it waits for {topic!r}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("send")(send_command)

"""``savegame ui``: serve the web UI (``savegame[ui]``) over a store."""

from __future__ import annotations

from typing import Annotated

import typer

from savegame.cli import render
from savegame.cli.options import StoreOption


def ui_command(
    store: StoreOption = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="Address to listen on; other than loopback needs --token.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")
    ] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TEXT",
            envvar="SAVEGAME_UI_TOKEN",
            show_envvar=True,
            help="Every request must carry it (the login link sets a cookie); 16+ characters.",
        ),
    ] = None,
    no_continue: Annotated[
        bool,
        typer.Option(
            "--no-continue",
            help="After a decision, leave the run queued for `savegame worker` instead of "
            "continuing it in this process.",
        ),
    ] = False,
) -> None:
    """Serve a local web UI: runs, timelines, states and diffs, the journal, approvals."""
    from savegame import ui

    def ready() -> None:
        shown = "localhost" if host in ("127.0.0.1", "::1", "localhost") else host
        link = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
        render.console().print(f"savegame ui on {link}  (Ctrl-C stops it)", soft_wrap=True)

    ui.serve(
        store, host=host, port=port, token=token, continue_runs=not no_continue, on_ready=ready
    )


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_command)

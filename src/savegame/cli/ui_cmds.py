"""``savegame ui``: serve the web UI (``savegame[ui]``) over a store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from savegame.cli import render
from savegame.cli.options import StoreOption

if TYPE_CHECKING:
    from savegame.ui import UIToken


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
        list[str] | None,
        typer.Option(
            "--token",
            metavar="[NAME:ROLE=]SECRET",
            help="A token every request must carry (the login link /?token=SECRET sets a "
            "cookie); 16+ characters. ROLE is viewer (reads) or approver (also decides; "
            "the default of a bare SECRET, named 'shared'). Repeatable. "
            "Default: $SAVEGAME_UI_TOKEN.",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="PATH",
            envvar="SAVEGAME_UI_TOKEN_FILE",
            show_envvar=True,
            help="A file of tokens, one [NAME:ROLE=]SECRET a line: keeps the secrets off the "
            "command line, which every user of the machine can read.",
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Show runs, states and journals, and offer no action: every POST is refused.",
        ),
    ] = False,
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

    def ready(tokens: tuple[UIToken, ...]) -> None:
        shown = "localhost" if host in ("127.0.0.1", "::1", "localhost") else host
        out = render.console()
        mode = "  read-only" if read_only else ""
        out.print(f"savegame ui on http://{shown}:{port}/{mode}  (Ctrl-C stops it)", soft_wrap=True)
        if tokens:  # by name: a secret is never printed (a terminal's output is often kept)
            out.print(
                f"tokens: {ui.describe_tokens(tokens)}; log in once with "
                f"http://{shown}:{port}/?token=<secret>",
                soft_wrap=True,
                markup=False,
            )

    ui.serve(
        store, host=host, port=port, tokens=token or (), token_file=token_file,
        read_only=read_only, continue_runs=not no_continue, on_ready=ready,
    )  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_command)

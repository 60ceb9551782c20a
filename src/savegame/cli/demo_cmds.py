"""``savegame demo``: an agent paused for approval, SIGKILLed mid-refund, resumed."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from savegame.cli import demo_view, render
from savegame.demo import run_demo


def demo_command(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            show_default=False,
            help="Store for the demo's runs (default: a fresh SQLite file in a temporary folder).",
        ),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep/--no-keep",
            show_default=False,
            help="Keep the demo's store and files, and print where they are (the default), "
            "or delete them at the end.",
        ),
    ] = True,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve the refund without asking.")
    ] = False,
) -> None:
    """Pause an agent for approval, SIGKILL it mid-refund, resume it, prove nothing happened twice.

    Asks for the approval at the terminal; approves by itself with --yes or when
    no terminal is attached.
    """
    out = render.console()
    interactive = not yes and sys.stdin.isatty()
    report = run_demo(
        store=store,
        keep=keep,
        on_event=demo_view.live(out),
        ask=demo_view.ask if interactive else None,
        auto="--yes" if yes else "no terminal attached",
    )
    demo_view.report(out, report)
    if not report.verdict:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)

"""``savegame migrate langgraph``: threads of LangGraph's savers moved into a savegame store."""

from __future__ import annotations

from typing import Annotated, Any

import typer

import savegame
from savegame.cli import jsonview, migrate_view, render
from savegame.cli.errors import Group, UsageError
from savegame.cli.options import JsonOption
from savegame.errors import ConfigurationError
from savegame.runtime import load

migrate_app = typer.Typer(
    cls=Group,
    name="migrate",
    help="Move data from other checkpointers into a savegame store.",
    no_args_is_help=True,
)


def _types(refs: list[str]) -> list[type[Any]]:
    found = []
    for ref in refs:
        if ":" not in ref:
            raise UsageError(f"--type {ref!r} must look like module:Class or path/file.py:Class")
        cls = load(ref)
        if not isinstance(cls, type):
            raise UsageError(f"--type {ref} is a {type(cls).__name__}, not a class")
        # Registered under its module path, as savegame names a type by default.
        found.append(savegame.register(cls))
    return found


@migrate_app.command("langgraph")
def langgraph_command(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A LangGraph SqliteSaver file (path or sqlite:///path) or a PostgresSaver "
            "URL (postgresql://...; its tables on the search path). Only read.",
        ),
    ],
    to: Annotated[
        str,
        typer.Option("--to", metavar="STORE_URL", help="The savegame store to move them into."),
    ],
    thread: Annotated[
        list[str] | None,
        typer.Option("--thread", metavar="THREAD", help="Only this thread (repeatable)."),
    ] = None,
    latest_only: Annotated[
        bool,
        typer.Option(
            "--latest-only",
            help="Only the newest checkpoint of each namespace, with its pending writes.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Read and check every checkpoint, write nothing; say what would move."
        ),
    ] = False,
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="MODULE:CLASS",
            help="A dataclass, pydantic model or enum the states hold, registered and read "
            "(repeatable). Other classes are reported with their path, not guessed.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Move a LangGraph SqliteSaver or PostgresSaver database's threads into savegame.

    Every checkpoint with its pending writes, subgraph namespaces and metadata is
    written through SavegameSaver and each thread is verified against the source.
    Safe to stop and run again: a thread lands whole or not at all, once. Needs
    langgraph-checkpoint-sqlite or langgraph-checkpoint-postgres. Exits 1 when a
    thread was skipped (the summary says why).
    """
    try:  # LangGraph is an optional extra: imported by this command only
        from savegame.integrations.langgraph import migrate
    except ImportError as exc:
        raise ConfigurationError(
            f"savegame migrate langgraph needs LangGraph: pip install 'savegame[langgraph]' ({exc})"
        ) from None
    with migrate_view.thread_bar(enabled=not as_json) as hooks:
        report = migrate(
            source,
            to,
            threads=thread or None,
            latest_only=latest_only,
            dry_run=dry_run,
            types=_types(types or []),
            on_start=hooks.on_start,
            on_thread=hooks.on_thread,
        )
    if as_json:
        jsonview.emit(migrate_view.as_json(report))
    else:
        migrate_view.summary(render.console(), report)
    if report.skipped:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(migrate_app)

"""Options shared by several commands, defined once."""

from __future__ import annotations

from typing import Annotated

import typer

from savegame.runtime import OnExists, OnThreadBusy

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        show_default=False,
        help="Store URL, e.g. sqlite:///path/to/file.db "
        "(default: $SAVEGAME_STORE, else sqlite:///savegame.db).",
    ),
]


JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print machine-readable JSON instead of tables."),
]

QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print only the run's id and status, on one line (--json is printed as without).",
    ),
]

#: The most rows a listing asks a store for: a bigger --limit overflowed SQLite's integers.
MAX_ROWS = 1_000_000

LangGraphThreadOption = Annotated[
    str | None,
    typer.Option(
        "--thread",
        metavar="THREAD",
        help="The LangGraph thread a LangGraph checkpoint id belongs to (needed only when "
        "copy_thread put it in several).",
    ),
]

LimitOption = Annotated[
    int,
    typer.Option("--limit", min=1, max=MAX_ROWS, help="Show at most this many rows."),
]

InputOption = Annotated[
    str | None,
    typer.Option("--input", "-i", metavar="JSON", help="Initial state keys, as a JSON object."),
]

ThreadOption = Annotated[
    str | None,
    typer.Option("--thread", metavar="THREAD", help="Thread to run on (default: a new one)."),
]

RunIdOption = Annotated[
    str | None,
    typer.Option(
        "--run-id",
        metavar="RUN_ID",
        help="Id for the run (default: generated); a run that exists is continued, see --on-exists.",
    ),
]

OnExistsOption = Annotated[
    OnExists,
    typer.Option(
        "--on-exists",
        metavar="continue|return|reject",
        help="When --run-id names a run that exists: continue it where it stopped (a "
        "finished one: show its recorded result, nothing executed), return it as it "
        "stands, or reject the start.",
    ),
]

OnThreadBusyOption = Annotated[
    OnThreadBusy,
    typer.Option(
        "--on-thread-busy",
        metavar="reject|wait|allow",
        help="When the thread has an unfinished run: refuse (naming it), wait until it "
        "has finished, or start a second run beside it.",
    ),
]

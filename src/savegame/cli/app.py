"""The root command, and where each command lives: a module imported only when it runs.

Each command parses, calls one public savegame function, renders; each ``*_cmds``
module adds its commands with ``register(app)``. Importing them all costs more than
the rest of ``savegame --help`` together (the runtime, the stores, the codec, rich's
tables: ~250 ms), so the root lists :data:`COMMANDS` (names and one-line help) without
importing one, and ``savegame CMD ...`` imports CMD's module alone.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from savegame.cli.app_dir import importable
from savegame.cli.errors import Group

#: Module (in ``savegame.cli``) -> the commands its ``register(app)`` adds, each with its
#: one-line help as ``savegame --help`` lists it: the first paragraph of the command's
#: docstring (a command group's ``help=``). In the order the root's help lists them;
#: tests/cli/test_startup.py keeps this table equal to the modules.
COMMANDS: dict[str, dict[str, str]] = {
    "run_cmds": {
        "run": "Start a run of a workflow (or continue the one --run-id names) and drive it to its end.",
        "resume": "Continue a run from its latest checkpoint (or an earlier one), in this process.",
    },
    "inspect_cmds": {
        "runs": "List runs, newest first; a LangGraph thread's runs (one per namespace) as LangGraph sees them.",
        "history": "List a run's checkpoints, newest first; a checkpoint other runs started from shows them.",
        "show": "Show one checkpoint with its full state.",
    },
    "demo_cmds": {
        "demo": "Pause an agent for approval, SIGKILL it mid-refund, resume it, prove nothing happened twice.",
    },
    "control_cmds": {
        "effects": "Show a run's journal: every tool call, model call, approval and compensation, oldest first.",
        "resolve": "Settle an in-doubt write call after checking the outside world; then `savegame resume` it.",
        "approvals": "List approvals and interrupts waiting for a person, across runs, oldest first.",
        "approve": "Approve a gated tool call (optionally with edited arguments), then continue the run here.",
        "reject": "Reject a gated tool call, then continue the run here (its step gets ApprovalRejected).",
        "answer": "Answer a waiting interrupt: a run's ctx.interrupt (then continue it here), or a LangGraph thread's interrupt().",
        "cancel": "Stop a run: a live one at its next step boundary, a waiting or failed one at once.",
        "compensate": "Undo a run's completed writes that declared a compensation, newest first, exactly once.",
    },
    "events_cmds": {
        "send": "Send an event to a run: its `ctx.wait_for(TOPIC)` returns the value, once.",
    },
    "storage_cmds": {
        "verify": "Check every checkpoint, blob and journal entry; list damaged records by id.",
        "prune": "Delete old checkpoints and finished runs; what a kept checkpoint needs to load stays.",
        "stats": "Show the store's size, then its largest runs.",
        "rekey": "Re-encrypt every payload, blob, journal entry and run row under the active key.",
        "keygen": "Print a new random key as kid:base64key, the form $SAVEGAME_KEYS takes.",
    },
    "fleet_cmds": {
        "submit": "Queue a run for the worker fleet instead of running it here; print its id.",
        "worker": "Claim queued and orphaned runs and execute them, until SIGTERM or Ctrl-C.",
    },
    "diff_cmds": {
        "diff": "Show what changed in the state from A to B: paths added, removed, changed; lists that grew.",
    },
    "export_cmds": {
        "export": "Write a run (or a thread) to one file: rows, checkpoints, journal, blobs, as stored.",
        "import": "Load an export file into a store; nothing is written unless the whole file checks.",
    },
    "time_cmds": {
        "tree": "Draw a thread's runs as a tree: which run each one forked from or continued, and where.",
        "fork": "Start a new run of the thread from a checkpoint, optionally edited, replayed against the journal.",
    },
    "replay_cmds": {
        "replay": "Replay recorded runs against the code: every model and tool call answered from the journal.",
    },
    "models_cmds": {
        "models": "Show a run's model calls, oldest first, with tokens and cost, and the totals per model.",
    },
    "ui_cmds": {
        "ui": "Serve a local web UI: runs, timelines, states and diffs, the journal, approvals.",
    },
    "queue_cmds": {
        "queues": "Queues for the worker fleet: their limits, depth and running counts.",
    },
    "migrate_cmds": {
        "migrate": "Move data from other checkpointers into a savegame store.",
    },
    "schedule_cmds": {
        "schedule": "Start a workflow at each occurrence of a cron expression, on the worker fleet.",
    },
}

DebugOption = Annotated[
    bool,
    typer.Option(
        "--debug",
        envvar="SAVEGAME_DEBUG",
        help="Show the full traceback when a command fails.",
    ),
]


def _print_version(asked: bool) -> None:
    if not asked:
        return
    # The installed distribution's version, read from its metadata: importing savegame's
    # own modules for a version number would cost what `savegame --help` avoids.
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(f"savegame {version('savegame')}")
    except PackageNotFoundError:  # sources on the path, never installed
        typer.echo("savegame (not installed: no version)")
    raise typer.Exit(0)


VersionOption = Annotated[
    bool,
    typer.Option(
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Show the installed version and exit.",
    ),
]


def load(module: str) -> dict[str, Any]:
    """The commands ``savegame.cli.<module>`` adds, built by typer as the root would."""
    here = typer.Typer()
    importlib.import_module(f"savegame.cli.{module}").register(here)
    return dict(typer.main.get_group(here).commands)


class _Unloaded(TyperCommand):
    """A command whose module is not imported yet: its name and help, for the root's list."""

    def __init__(self, name: str, module: str, help_text: str) -> None:
        super().__init__(name, help=help_text)
        self.module = module


class Commands(Group):
    """The root group: every command of :data:`COMMANDS`, each one's module imported when
    the command is looked up (to run, or to show its own ``--help``)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # In self.commands too: typer's "did you mean" reads the names from there.
        for module, commands in COMMANDS.items():
            for name, help_text in commands.items():
                self.commands.setdefault(name, _Unloaded(name, module, help_text))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Unloaded):
            self.commands.update(load(command.module))
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from savegame.cli import root_help  # rich's parts, for this help only

        listed = (
            (name, _first(command.short_help or command.help))
            for name, command in self.commands.items()
            if not command.hidden
        )
        root_help.print_help(self, ctx, listed)


def _first(help_text: str | None) -> str:
    # What typer lists for a command: the first paragraph of its help.
    return inspect.cleandoc(help_text or "").split("\n\n")[0].strip()


app = typer.Typer(
    cls=Commands,
    name="savegame",
    help="Durable execution for AI agents: run, resume and inspect checkpointed runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(debug: DebugOption = False, version: VersionOption = False) -> None:
    """Durable execution for AI agents: run, resume and inspect checkpointed runs."""
    # --debug is read by Group.invoke from the parsed parameters.
    importable()  # a run's `module:attr` is found beside the user, as with `python -m`

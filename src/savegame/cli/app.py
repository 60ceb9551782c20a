"""The commands. Each one parses, calls one public savegame function, renders."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

import savegame
from savegame.cli import (
    control_cmds,
    diff_cmds,
    events_cmds,
    export_cmds,
    fleet_cmds,
    jsonview,
    langgraph_view,
    migrate_cmds,
    queue_cmds,
    render,
    schedule_cmds,
    storage_cmds,
    time_cmds,
    time_view,
    ui_cmds,
)
from savegame.cli.common import finish, load_workflow, parse_input, parse_json, progress
from savegame.cli.errors import Group, UsageError
from savegame.cli.options import (
    MAX_ROWS,
    DebugOption,
    InputOption,
    JsonOption,
    LangGraphThreadOption,
    LimitOption,
    OnExistsOption,
    OnThreadBusyOption,
    RunIdOption,
    StoreOption,
    ThreadOption,
)
from savegame.cli.starting import starting
from savegame.integrations import langgraph
from savegame.model import RunStatus

app = typer.Typer(
    cls=Group,
    name="savegame",
    help="Durable execution for AI agents: run, resume and inspect checkpointed runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(debug: DebugOption = False) -> None:
    """Durable execution for AI agents: run, resume and inspect checkpointed runs."""
    # --debug is read by Group.invoke from the parsed parameters.


def _parse_status(text: str | None) -> RunStatus | None:
    if text is None:
        return None
    try:
        return RunStatus(text)
    except ValueError:
        choices = ", ".join(s.value for s in RunStatus)
        raise UsageError(f"unknown status {text!r} (one of: {choices})") from None


@app.command("run")
def run_command(
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:ATTR", help="The workflow or agent: module:attr or path/file.py:attr."
        ),
    ],
    input_json: InputOption = None,
    thread: ThreadOption = None,
    run_id: RunIdOption = None,
    on_exists: OnExistsOption = "continue",
    on_thread_busy: OnThreadBusyOption = "reject",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a run of a workflow (or continue the one --run-id names) and drive it to its end."""
    state = parse_input(input_json)
    target = load_workflow(workflow)
    res = savegame.run(
        target,
        state,
        thread_id=thread,
        run_id=run_id,
        store=store,
        observer=starting(progress(as_json), as_json),
        on_exists=on_exists,
        on_thread_busy=on_thread_busy,
    )
    finish(res, as_json=as_json, verb="ended", store=store)


@app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to continue.")],
    value: Annotated[
        str | None,
        typer.Option(
            "--value", metavar="JSON", help="The answer to the run's pending interrupt, as JSON."
        ),
    ] = None,
    interrupt: Annotated[
        str | None,
        typer.Option("--interrupt", metavar="ID", help="Which pending interrupt --value answers."),
    ] = None,
    from_checkpoint: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="CHECKPOINT_ID",
            help="Continue from this checkpoint of the run instead of its latest "
            "(e.g. when `savegame verify` finds the latest damaged; see `savegame history`).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="A run waiting for a timer, an event or child runs: wait here until it is "
            "woken (and whenever it waits again) instead of refusing.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a run from its latest checkpoint (or an earlier one), in this process."""
    options: dict[str, Any] = {}
    if value is not None:
        options = {"value": parse_json(value, "--value"), "interrupt_id": interrupt}
    elif interrupt is not None:
        raise UsageError("--interrupt names the interrupt that --value answers: give --value too")
    res = savegame.resume(
        run_id,
        store=store,
        observer=progress(as_json),
        from_checkpoint=from_checkpoint,
        wait=wait,
        **options,
    )
    finish(res, as_json=as_json, verb="resumed and ended", store=store)


@app.command("runs")
def runs_command(
    thread: Annotated[
        str | None, typer.Option("--thread", metavar="THREAD", help="Only runs of this thread.")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs with this status (running, completed, ...).",
        ),
    ] = None,
    limit: LimitOption = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first; a LangGraph thread's runs (one per namespace) as LangGraph sees them."""
    items = savegame.list_runs(
        thread_id=thread, status=_parse_status(status), limit=limit, store=store
    )
    heads = langgraph.line_heads(items, store=store)
    if as_json:
        jsonview.emit_many(
            langgraph_view.run_json(info, heads[info.run_id])
            if info.run_id in heads
            else jsonview.run(info)
            for info in items
        )
    elif heads:
        langgraph_view.runs(render.console(), items, heads)
    else:
        render.runs(render.console(), items)


@app.command("history")
def history_command(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|THREAD", help="A run, or a LangGraph thread (its root namespace)."
        ),
    ],
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=MAX_ROWS, help="Show at most this many checkpoints."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a run's checkpoints, newest first; a checkpoint other runs started from shows them.

    A LangGraph run (or thread) lists LangGraph's checkpoint ids, steps and next nodes.
    """
    found = langgraph.line_history(run_id, limit=limit, store=store)
    if found is not None:
        line, rows = found
        if as_json:
            jsonview.emit(langgraph_view.history_json(rows))
        else:
            langgraph_view.history(render.console(), line, rows)
        return
    items = savegame.history(run_id, limit=limit, store=store)
    # Forks are marked where they left: the runs started from each checkpoint.
    lineage = savegame.tree(run_id, store=store)
    forks = {cp: [n.run_id for n in nodes] for cp, nodes in lineage.forks_at(run_id).items()}
    if as_json:
        jsonview.emit_many(
            {**jsonview.header(h), "forks": forks.get(h.checkpoint_id, [])} for h in items
        )
    else:
        out = render.console()
        render.history(out, run_id, items, forks)
        time_view.kin(out, lineage.node(run_id))


@app.command("show")
def show_command(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|CHECKPOINT_ID",
            help="A checkpoint, or a run (its latest checkpoint); a LangGraph thread, "
            "or a LangGraph checkpoint id.",
        ),
    ],
    thread: LangGraphThreadOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one checkpoint with its full state.

    A LangGraph checkpoint shows its channels, next nodes and pending writes.
    """
    found = langgraph.find_checkpoint(ident, thread=thread, store=store)
    if found is not None:
        if as_json:
            jsonview.emit(langgraph_view.checkpoint_json(found))
        else:
            langgraph_view.checkpoint(render.console(), found)
        return
    cp = savegame.get_checkpoint(ident, store=store)
    if as_json:
        jsonview.emit(jsonview.checkpoint(cp))
    else:
        render.checkpoint(render.console(), cp)


@app.command("demo")
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
    from savegame.cli import demo_view
    from savegame.demo import run_demo

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


control_cmds.register(app)
events_cmds.register(app)
storage_cmds.register(app)
fleet_cmds.register(app)
queue_cmds.register(app)
diff_cmds.register(app)
export_cmds.register(app)
time_cmds.register(app)
migrate_cmds.register(app)
ui_cmds.register(app)
schedule_cmds.register(app)

"""Commands that act on runs from outside: the journal, approvals, in-doubt calls, cancel, compensate.

approve, reject and answer record a person's decision, then continue the run in this
process where its workflow imports, and show where it ended as ``savegame
resume`` would; with --no-resume (or where the workflow does not import) the
run is queued for a worker or a later ``savegame resume`` instead. A recorded
decision exits 0, even when continuing failed (that is a line on stderr).
"""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer
from rich.text import Text

import savegame
from savegame.cli import jsonview, render
from savegame.cli.common import finish, parse_json, parse_object, progress
from savegame.cli.errors import CliError, UsageError, one_line
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, QuietOption, StoreOption
from savegame.cli.words import plural, store_tail
from savegame.codec import to_data
from savegame.effects import decisions
from savegame.integrations import langgraph
from savegame.model import EffectKind, EffectRecord, RunStatus
from savegame.redaction import redact

RunArg = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run.")]
InterruptOption = Annotated[
    str | None,
    typer.Option(
        "--interrupt",
        metavar="ID",
        help="Which pending approval or interrupt, when it waits for several (see `savegame approvals`).",
    ),
]
ByOption = Annotated[
    str | None,
    typer.Option("--by", metavar="NAME", help="Who decides (default: user@host)."),
]


def effects_command(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|THREAD",
            help="A run, or a LangGraph thread (the journals of its namespaces).",
        ),
    ],
    everything: Annotated[
        bool,
        typer.Option("--all", help="A LangGraph run's internal entries too (its pending writes)."),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run's journal: every tool call, model call, approval and compensation, oldest first.

    A LangGraph run (or thread) lists its durable tools' calls; LangGraph's own pending
    writes, which the same journal keeps, only with --all.
    """
    sg = connected(store)
    found = langgraph.line_effects(
        run_id, everything=everything, store=sg.store, storage=sg.storage
    )
    items = sg.effects(run_id) if found is None else found.effects
    if as_json:
        jsonview.emit_many(jsonview.effect(e) for e in items)
        return
    out = render.console()
    if found is None:
        render.effects(out, run_id, items)
        return
    whose = f"LangGraph thread {run_id}" if run_id == found.thread_id else f"LangGraph run {run_id}"
    render.effects(out, run_id, items, what=whose)
    if found.hidden:
        out.print(
            Text(
                f"{plural(found.hidden, 'internal entry', 'internal entries')} of "
                "LangGraph (pending writes) not shown: --all shows them",
                style="dim",
            )
        )


def resolve_command(
    run_id: RunArg,
    effect: Annotated[
        str,
        typer.Option("--effect", metavar="ID", help="The in-doubt call's request id."),
    ],
    done: Annotated[
        bool | None,
        typer.Option(
            "--done/--not-done",
            show_default=False,
            help="It happened (the run gets --result) / it did not (the run calls again).",
        ),
    ] = None,
    result: Annotated[
        str | None,
        typer.Option(
            "--result",
            metavar="JSON",
            help="With --done, required: what the call returned (null if nothing).",
        ),
    ] = None,
    by: ByOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Settle an in-doubt write call after checking the outside world; then `savegame resume` it."""
    if done is None:
        raise UsageError("say whether the call happened: --done or --not-done")
    if result is not None and not done:
        raise UsageError("--result goes with --done: a call that did not happen has no result")
    # No --result is not null: for a write, resolve refuses it (exit 2).
    value = decisions.NO_RESULT if result is None else parse_json(result, "--result")
    entry = connected(store).resolve(run_id, effect, done=done, result=value, by=by)
    outcome = "done" if done else "not done"
    # A compensation's run goes on with `compensate`, the others' with `resume`.
    verb = "compensate" if entry.kind is EffectKind.COMPENSATION else "resume"
    if as_json:
        jsonview.emit(
            {
                "run_id": run_id,
                "request_id": entry.request_id,
                "status": entry.status.value,
                "by": entry.metadata.get("by"),
                "next": f"savegame {verb} {run_id}",
            }
        )
        return
    out = render.console()
    out.print(
        f"{entry.request_id} ({entry.name}) settled as {outcome} by {entry.metadata.get('by')}"
    )
    tail = store_tail(store)
    if verb == "compensate":
        then = "skips this undo" if done else "calls it again"
        out.print(f"next: savegame compensate {run_id}{tail}  (it {then})", soft_wrap=True)
        return
    then = "gets the recorded result" if done else "calls it again"
    out.print(f"next: savegame resume {run_id}{tail}  (the step {then})", soft_wrap=True)


def approvals_command(
    run: Annotated[
        str | None, typer.Option("--run", metavar="RUN_ID", help="Only this run.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List approvals and interrupts waiting for a person, across runs, oldest first.

    A LangGraph thread's interrupt() shows on the thread's root run until answered.
    """
    sg = connected(store)
    items = langgraph.waiting(run, store=sg.store, storage=sg.storage)
    if as_json:
        jsonview.emit_many(jsonview.pending(p) for p in items)
        return
    out = render.console()
    render.approvals(out, items)
    if items:
        out.print(
            "approve: savegame approve RUN_ID [--edit JSON]   reject: savegame reject RUN_ID "
            "--reason TEXT   answer: savegame answer RUN_ID --value JSON",
            soft_wrap=True,
        )


ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume/--no-resume",
        show_default=False,
        help="Then continue the run here, where its workflow imports (the default); "
        "--no-resume only records the decision and queues the run for a worker or a "
        "later `savegame resume`.",
    ),
]


def approve_command(
    run_id: RunArg,
    interrupt: InterruptOption = None,
    edit: Annotated[
        str | None,
        typer.Option(
            "--edit", metavar="JSON", help="Replace the tool's arguments (a JSON object)."
        ),
    ] = None,
    by: ByOption = None,
    resume: ResumeOption = True,
    store: StoreOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Approve a gated tool call (optionally with edited arguments), then continue the run here."""
    arguments = None if edit is None else parse_object(edit, "--edit", "tool arguments")
    sg = connected(store)
    decision = sg.approve(
        run_id, interrupt_id=interrupt, edit=arguments, by=by, resume=resume,
        observer=_telling("approved", as_json or quiet),
    )  # fmt: skip
    _decided(sg, "approved", decision, store, as_json, quiet=quiet)


def reject_command(
    run_id: RunArg,
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="Why; the step (and a model) sees it.")
    ],
    interrupt: InterruptOption = None,
    by: ByOption = None,
    resume: ResumeOption = True,
    store: StoreOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Reject a gated tool call, then continue the run here (its step gets ApprovalRejected)."""
    sg = connected(store)
    decision = sg.reject(
        run_id, reason=reason, interrupt_id=interrupt, by=by, resume=resume,
        observer=_telling("rejected", as_json or quiet),
    )  # fmt: skip
    _decided(sg, "rejected", decision, store, as_json, quiet=quiet)


def _telling(verb: str, silent: bool) -> savegame.client.Observer:
    """Progress lines, after one for the decision as soon as it is recorded (none when
    ``silent``: under --json or --quiet)."""
    observer = progress(silent)
    if not silent:

        def on_decision(entry: EffectRecord) -> None:
            render.console().print(
                f"{verb} {entry.name} ({entry.request_id}) by {entry.metadata.get('by')}",
                soft_wrap=True,
            )

        observer.on_decision = on_decision
    return observer


def _decided(
    sg: savegame.Savegame,
    verb: str,
    decision: savegame.client.Decision,
    store: str | None,
    as_json: bool,
    *,
    quiet: bool = False,
) -> None:
    """The decision, then where the run went: continued here, failed here, or left to others.

    Exit 0 whenever the decision was recorded; a failure to continue is a line on stderr.
    """
    entry = decision.entry
    run_id = entry.run_id
    out = render.console()
    if decision.result is not None:
        finish(
            sg, decision.result, as_json=as_json, verb="resumed and ended", store=store, quiet=quiet
        )
        return
    why = decision.not_continued
    if decision.error is not None:
        why = redact(one_line(decision.error), store)
        sys.stderr.write(f"warning: {verb}, but run {run_id} was not continued here: {why}\n")
        sys.stderr.flush()
    if quiet and not as_json:
        render.quiet(out, run_id, sg.get_run(run_id).status)
        return
    tail = store_tail(store)
    then = (
        "a worker (savegame worker) or `savegame resume` continues it"
        if decision.queued
        else "continue it with `savegame resume`"
    )
    if as_json:
        jsonview.emit(
            {
                "run_id": run_id,
                "request_id": entry.request_id,
                "decision": entry.status.value,
                "by": entry.metadata.get("by"),
                "continued": False,
                "queued": decision.queued,
                "reason": why,
                "next": f"savegame resume {run_id}{tail}",
            }
        )
        return
    if decision.error is None:
        out.print(f"run {run_id} not continued here: {why}", soft_wrap=True)
    out.print(f"next: savegame resume {run_id}{tail}  ({then})", soft_wrap=True)


def answer_command(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|THREAD", help="The waiting run, or a LangGraph thread (or its run)."
        ),
    ],
    value: Annotated[
        str,
        typer.Option(
            "--value", metavar="JSON", help="The answer, as JSON: what the interrupt returns."
        ),
    ],
    interrupt: InterruptOption = None,
    by: ByOption = None,
    resume: ResumeOption = True,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a waiting interrupt: a run's ctx.interrupt (then continue it here), or a LangGraph thread's interrupt().

    A LangGraph thread's answer is recorded as LangGraph keeps a resume, with who gave
    it and when, without the graph's code; `graph.invoke(None, config)` in the
    application then continues the node with it. An interrupt answered already is refused.
    """
    answer = parse_json(value, "--value")
    sg = connected(store)
    if langgraph.thread_of(ident, store=sg.store, storage=sg.storage) is None:
        decision = sg.supply(
            ident, answer, interrupt_id=interrupt, by=by, resume=resume,
            observer=_telling("answered", as_json),
        )  # fmt: skip
        _decided(sg, "answered", decision, store, as_json)
        return
    done = langgraph.answer(
        ident, answer, interrupt_id=interrupt, by=by, store=sg.store, storage=sg.storage
    )
    if as_json:
        jsonview.emit(
            {
                "thread_id": done.thread_id,
                "run_id": done.run_id,
                "interrupt_id": done.interrupt_id,
                "node": done.node,
                "value": to_data(done.value, "value"),
                "by": done.by,
                "at": done.at,
                "continued": False,
                "next": f"graph.invoke(None, {orjson.dumps(done.config).decode()})",
            }
        )
        return
    out = render.console()
    out.print(
        f"answered interrupt {done.interrupt_id} ({done.node}) of LangGraph thread "
        f"{done.thread_id} by {done.by}",
        soft_wrap=True,
    )
    out.print(
        f"next: the application continues it: graph.invoke(None, "
        f"{orjson.dumps(done.config).decode()})  (the node gets this answer)",
        soft_wrap=True,
    )


def cancel_command(
    run_id: RunArg,
    compensate: Annotated[
        bool,
        typer.Option("--compensate", help="Then undo the run's completed writes (saga)."),
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=0,
            help="How long to wait for a live process to stop at its next boundary.",
        ),
    ] = 30.0,
    by: Annotated[
        str | None,
        typer.Option("--by", metavar="NAME", help="Who cancels (default: user@host)."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a run: a live one at its next step boundary, a waiting or failed one at once."""
    info = connected(store).cancel(run_id, compensate_effects=compensate, wait=wait, by=by)
    if as_json:
        jsonview.emit(jsonview.run(info))
    else:
        render.console().print(Text.assemble(f"run {run_id}: ", render.status(info.status)))
    if info.status is RunStatus.RUNNING:
        # The owner did not reach a boundary in time; the request stays and it stops there.
        raise CliError(
            f"run {run_id} is still running after {wait:g}s; it stops at its next step "
            "boundary (the cancel request stays)"
        )


def compensate_command(
    run_id: RunArg, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Undo a run's completed writes that declared a compensation, newest first, exactly once."""
    res = connected(store).compensate(run_id)
    if as_json:
        jsonview.emit(jsonview.result(res))
        return
    out = render.console()
    out.print(Text.assemble(f"run {run_id}: ", render.status(res.status)))
    tail = store_tail(store)
    out.print(f"what was undone: savegame effects {run_id}{tail}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("effects")(effects_command)
    app.command("resolve")(resolve_command)
    app.command("approvals")(approvals_command)
    app.command("approve")(approve_command)
    app.command("reject")(reject_command)
    app.command("answer")(answer_command)
    app.command("cancel")(cancel_command)
    app.command("compensate")(compensate_command)

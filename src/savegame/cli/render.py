"""Views for people: rich tables and panels over savegame's records."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from savegame.cli.words import plural, store_tail
from savegame.codec import to_data
from savegame.control import Effect
from savegame.effects import PendingInterrupt
from savegame.model import (
    VERSION_KEY,
    Checkpoint,
    CheckpointHeader,
    EffectKind,
    EffectStatus,
    RunInfo,
    RunResult,
    RunStatus,
    Usage,
)
from savegame.runtime import OwnerGone

PIPED_WIDTH = 160

STATUS_STYLE = {
    RunStatus.RUNNING: "cyan",
    RunStatus.INTERRUPTED: "yellow",
    RunStatus.WAITING: "yellow",
    RunStatus.NEEDS_ATTENTION: "bold magenta",
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "bold red",
    RunStatus.CANCELLED: "dim",
    RunStatus.COMPENSATING: "blue",
    RunStatus.COMPENSATED: "blue",
    RunStatus.COMPENSATION_FAILED: "bold red",
}

EFFECT_STYLE = {
    EffectStatus.PENDING: "yellow",
    EffectStatus.DONE: "green",
    EffectStatus.FAILED: "red",
    EffectStatus.REJECTED: "red",
    EffectStatus.NOT_DONE: "dim",
}

#: Arguments and results are cut to this many characters in tables.
SHORT = 40


def console() -> Console:
    """A console on the current stdout (looked up per call, so test runners can swap it).

    Piped output is not cut at rich's default of 80 columns: tables keep their
    natural width so ids stay whole for grep and copy-paste.
    """
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(highlight=False, width=PIPED_WIDTH if piped else None)


def status(value: RunStatus) -> Text:
    return Text(value.value, style=STATUS_STYLE.get(value, ""))


def when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def usage(u: Usage) -> str:
    parts = [plural(u.llm_calls, "llm call"), plural(u.tool_calls, "tool call")]
    if u.input_tokens or u.output_tokens:
        parts.append(f"{u.input_tokens}+{u.output_tokens} tokens")
    if u.cost_usd is None:
        parts.append("cost unknown")  # a model call had no price: no partial sum
    elif u.cost_usd:
        parts.append(f"${u.cost_usd:.4f}")
    return ", ".join(parts)


def state(value: dict[str, Any]) -> JSON:
    """The state as stored (tagged values visible), pretty-printed."""
    return JSON(orjson.dumps(to_data(value)).decode(), indent=2, sort_keys=False)


def new_table(title: str) -> Table:
    return Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")


def resume_command(run_id: str, store: str | None) -> str:
    return f"savegame resume {run_id}" + (f" --store {store}" if store else "")


def runs(
    out: Console,
    items: Sequence[RunInfo],
    gone: Mapping[str, OwnerGone] | None = None,
    store: str | None = None,
) -> None:
    """The runs, newest first; those whose owner is gone (``gone``, by run id) say so,
    with the command that continues each."""
    gone = gone or {}
    if not items:
        out.print("no runs")
        return
    table = new_table(f"{plural(len(items), 'run')} (newest first)")
    table.add_column("run", no_wrap=True)
    table.add_column("thread", overflow="fold")
    table.add_column("workflow", overflow="fold")
    table.add_column("version", overflow="fold")
    table.add_column("status")
    table.add_column("step", justify="right")
    table.add_column("updated (UTC)", no_wrap=True)
    for info in items:
        table.add_row(
            info.run_id,
            "=" if info.thread_id == info.run_id else info.thread_id,
            info.workflow,
            info.version or "",
            Text(f"{info.status.value} (owner gone)", style="bold red")
            if info.run_id in gone
            else status(info.status),
            str(info.step),
            when(info.updated_at),
        )
    out.print(table)
    for run_id, dead in gone.items():
        out.print(
            f"run {run_id}: its owner is gone ({dead.reason}); "
            f"continue it: {resume_command(run_id, store)}",
            soft_wrap=True,
        )
    for version, count in versions_waiting(items, gone).items():
        out.print(
            f"{plural(count, 'queued run')} of version {version}: waiting for a worker of "
            f"version {version} (`savegame worker --version {version}`, or one that "
            f"declares it --compatible, or one without --version)",
            soft_wrap=True,
        )


def versions_waiting(items: Sequence[RunInfo], gone: Mapping[str, OwnerGone]) -> dict[str, int]:
    """The code versions of the queued runs no worker holds, with how many of each: a
    worker given versions claims only runs of those, so these wait for one of theirs."""
    found: dict[str, int] = {}
    for info in items:
        queued = info.status is RunStatus.QUEUED and info.lease is None
        if queued and info.run_id not in gone and info.version is not None:
            found[info.version] = found.get(info.version, 0) + 1
    return found


def _lineage(h: CheckpointHeader, forks: Mapping[str, Sequence[str]]) -> Text:
    """Where runs forked off this checkpoint, or where this fork came from."""
    text = Text()
    started = forks.get(h.checkpoint_id, ())
    if started:
        text.append(f"⑂ {', '.join(started)}", style="magenta")
    fork = h.metadata.get("fork")
    if isinstance(fork, Mapping) and h.parent_id is not None:
        text.append(f"{h.metadata.get('source', 'fork')} of {h.parent_id}", style="magenta")
    return text


def history(
    out: Console,
    run_id: str,
    items: Sequence[CheckpointHeader],
    forks: Mapping[str, Sequence[str]] | None = None,
) -> None:
    forks = forks or {}
    marks = [_lineage(h, forks) for h in items]
    table = new_table(f"run {run_id}: {plural(len(items), 'checkpoint')} (newest first)")
    table.add_column("step", justify="right")
    table.add_column("node")
    table.add_column("checkpoint", no_wrap=True)
    table.add_column("status")
    table.add_column("next")
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    marked = any(m.plain for m in marks)
    if marked:
        table.add_column("forks", overflow="fold")
    for h, mark in zip(items, marks, strict=True):
        table.add_row(
            str(h.step),
            h.node or Text("(input)", style="dim"),
            h.checkpoint_id,
            status(h.status),
            h.next or Text("-", style="dim"),
            size(h.size),
            when(h.created_at),
            *([mark] if marked else []),
        )
    out.print(table)
    # The run's first checkpoint (the oldest listed) names the code version it started under.
    started = next(
        (v for h in reversed(items) if isinstance(v := h.metadata.get(VERSION_KEY), str)), None
    )
    if started is not None:
        out.print(f"started under code version {started}", soft_wrap=True)
    waits = items[0].metadata.get("waiting") if items else None
    if (
        items
        and items[0].status is RunStatus.WAITING
        and isinstance(waits, Mapping)
        and waits.get("for")
    ):
        # An expiring approval's deadline, a sleep's end: what the run waits for now.
        out.print(Text(f"waiting for: {waits['for']}", style="yellow"), soft_wrap=True)
    failed = next((h for h in items if h.status is RunStatus.FAILED), None)
    if failed is not None and failed.metadata.get("error"):
        out.print(Text(f"failed: {failed.metadata['error']}", style="red"))


def _fields(out: Console, rows: Sequence[tuple[str, Any]]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in rows:
        grid.add_row(name, value if isinstance(value, Text) else str(value))
    out.print(grid)


def checkpoint(out: Console, cp: Checkpoint) -> None:
    h = cp.header
    rows: list[tuple[str, Any]] = [
        ("checkpoint", h.checkpoint_id),
        ("run", h.run_id),
        ("thread", h.thread_id),
        ("parent", h.parent_id or "-"),
        ("step", h.step),
        ("node", h.node or "(input)"),
        ("status", status(h.status)),
        ("next", h.next or "-"),
        ("created", when(h.created_at) + " UTC"),
        ("size", size(h.size)),
    ]
    if h.usage != Usage():
        rows.append(("usage", usage(h.usage)))
    if h.metadata:
        rows.append(("metadata", orjson.dumps(to_data(dict(h.metadata))).decode()))
    _fields(out, rows)
    out.print(Text("state", style="bold"))
    out.print(state(cp.state))


def progress(out: Console, h: CheckpointHeader, seconds: float) -> None:
    """One line per committed checkpoint while a run is going, with the run's status at it."""
    out.print(
        Text.assemble(
            f"step {h.step:>3}  {h.node or '(input)':<12} -> {h.next or 'end':<12} ",
            status(h.status),
            " " * max(1, 13 - len(h.status.value)),
            f"{h.checkpoint_id} {size(h.size):>9} {seconds * 1000:7.2f} ms",
        )
    )


def result(out: Console, res: RunResult, *, verb: str) -> None:
    out.print(
        Text.assemble(
            f"run {res.run_id} {verb}: ",
            status(res.status),
            f" after {plural(res.step, 'step')}",
        )
    )
    rows: list[tuple[str, Any]] = [
        ("thread", res.thread_id),
        ("checkpoint", res.checkpoint_id),
    ]
    if res.usage != Usage():
        rows.append(("usage", usage(res.usage)))
    _fields(out, rows)
    out.print(Text("state", style="bold"))
    out.print(state(res.state))


def quiet(out: Console, run_id: str, run_status: RunStatus) -> None:
    """What ``--quiet`` prints: the run and its status, one line a script splits on a space."""
    out.print(f"{run_id} {run_status.value}", soft_wrap=True, highlight=False)


def short(value: Any, limit: int = SHORT) -> str:
    """A value as compact JSON (tagged values visible), cut to ``limit`` characters."""
    if value is None:
        return ""
    text = orjson.dumps(to_data(value, "value")).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def effects(out: Console, run_id: str, items: Sequence[Effect], *, what: str | None = None) -> None:
    """The journal table; ``what`` names whose it is (default: ``run RUN_ID``)."""
    what = what or f"run {run_id}"
    if not items:
        out.print(f"{what} has no journal entries")
        return
    table = new_table(
        f"{what}: {plural(len(items), 'journal entry', 'journal entries')} (oldest first)"
    )
    # A fork's calls: reused from the journal it left, or executed for real.
    replayed = any("replay" in e.metadata for e in items)
    columns = ("request id", "kind", "name", "step/node", "status", "args", "result", "error")
    for name in (*columns, *(("replay",) if replayed else ())):
        table.add_column(name, no_wrap=name == "request id", overflow="fold")
    for e in items:
        how = str(e.metadata.get("replay", ""))
        extra = [Text(how, style="green" if how == "reused" else "yellow")] if replayed else []
        table.add_row(
            e.request_id,
            e.kind.value,
            e.name,
            f"{e.step}/{e.node}",
            Text(e.status.value, style=EFFECT_STYLE.get(e.status, "")),
            # A model call keeps only a digest of its prompt: the messages live in the state.
            short(e.arguments),
            short(e.result),
            Text(e.error or "", style="red"),
            *extra,
        )
    out.print(table)
    doubt = [e for e in items if e.status is EffectStatus.PENDING and e.kind is EffectKind.WRITE]
    for e in doubt:
        out.print(
            Text(f"in doubt: {e.request_id} ({e.name}) started and has no result", style="magenta"),
            soft_wrap=True,
        )


def approvals(out: Console, items: Sequence[PendingInterrupt]) -> None:
    if not items:
        out.print("nothing is waiting for a person")
        return
    table = new_table(f"{len(items)} waiting for a person (oldest first)")
    columns = ["run", "interrupt id", "kind", "name", "payload", "at step", "since (UTC)"]
    expiring = any(p.expires_at is not None for p in items)
    if expiring:
        columns.append("deadline (UTC)")
    for name in columns:
        table.add_column(name, no_wrap=name in ("run", "interrupt id"), overflow="fold")
    for p in items:
        row = [
            p.run_id,
            p.interrupt_id,
            p.kind.value,
            p.name,
            short(p.payload, 60),
            f"{p.step} -> {p.node}",  # as history shows the checkpoint: its step, what is next
            when(p.created_at),
        ]
        if expiring:
            row.append(deadline(p))
        table.add_row(*row)
    out.print(table)


def deadline(p: PendingInterrupt) -> str:
    """An expiring approval's deadline and what it decides, or '' (it has none)."""
    if p.expires_at is None:
        return ""
    if p.on_expiry == "escalated":
        return f"{when(p.expires_at)} (escalated)"
    return f"{when(p.expires_at)}, then {p.on_expiry}"


def _call(p: PendingInterrupt) -> str:
    if p.kind is EffectKind.APPROVAL and isinstance(p.payload, dict):
        args = ", ".join(f"{k}={v!r}" for k, v in p.payload.items())
        return f"{p.name}({args})"
    return f"{p.name} {short(p.payload, 80)}"


def waiting(
    out: Console, run_id: str, items: Sequence[PendingInterrupt], store: str | None
) -> None:
    """What an interrupted run waits for, and the commands that continue it."""
    tail = store_tail(store)
    several = len(items) > 1
    for p in items:
        which = f" --interrupt {p.interrupt_id}" if several else ""
        if p.kind is EffectKind.APPROVAL:
            out.print(Text.assemble(("waiting for approval: ", "yellow"), _call(p)), soft_wrap=True)
            out.print(f"  interrupt  {p.interrupt_id}", soft_wrap=True)
            out.print(
                f"  approve:   savegame approve {run_id}{which}{tail} [--edit JSON]", soft_wrap=True
            )
            out.print(
                f"  reject:    savegame reject {run_id}{which}{tail} --reason TEXT", soft_wrap=True
            )
        else:
            out.print(Text.assemble(("waiting for a value: ", "yellow"), _call(p)), soft_wrap=True)
            out.print(f"  interrupt  {p.interrupt_id}", soft_wrap=True)
            out.print(
                f"  answer:    savegame resume {run_id}{which}{tail} --value JSON", soft_wrap=True
            )
    out.print(f"  or stop:   savegame cancel {run_id}{tail}", soft_wrap=True)

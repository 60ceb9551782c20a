"""Views of LangGraph threads (runs SavegameSaver wrote): channels, next nodes, pending
writes, for people and as JSON. The reading itself is ``savegame.integrations.langgraph``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from savegame.cli import jsonview
from savegame.cli.diff_view import changes, value
from savegame.cli.render import new_table, size, when
from savegame.cli.render import status as run_status
from savegame.cli.words import plural
from savegame.codec import to_data
from savegame.integrations.langgraph import (
    LangGraphCheckpoint,
    LangGraphDiff,
    PendingWrite,
    ShownRun,
    Task,
    ThreadLine,
    message_line,
)

#: Characters of a message or value on one line.
WIDTH = 100
#: The newest items of a long list shown by ``show`` (``--json`` has them all).
ITEMS = 20

STATUS_STYLE = {"done": "green", "interrupted": "yellow", "error": "bold red", "pending": "cyan"}


def where(line: ThreadLine) -> str:
    """``root`` or ``subgraph outer > inner``."""
    return line.where


def names(tasks: Sequence[Task]) -> str:
    return ", ".join(t.name for t in tasks)


def item(v: Any, width: int = WIDTH) -> str:
    """A message as ``ai: text`` cut to ``width``, a list of them as ``[ai: ...; human: ...]``;
    anything else as the diff shows values."""
    if _messages(v):
        line = "[" + "; ".join(item(m, max(20, width // len(v))) for m in v) + "]"
    else:
        line = message_line(v) or value(v, width)
    return line if len(line) <= width else line[: width - 1] + "…"


def _messages(v: Any) -> bool:
    return isinstance(v, list | tuple) and bool(v) and all(message_line(m) is not None for m in v)


def status(cp: LangGraphCheckpoint) -> Text:
    if cp.reading is None:
        return Text("?", style="dim")
    s = cp.reading.status
    return Text(s, style=STATUS_STYLE.get(s, ""))


def _step(cp: LangGraphCheckpoint) -> str:
    return "?" if cp.step is None else str(cp.step)


# -- runs ---------------------------------------------------------------------------------
def runs(out: Console, items: Sequence[ShownRun]) -> None:
    """The runs table; a LangGraph run says so with its namespace, and shows the status
    and step LangGraph sees."""
    table = new_table(f"{plural(len(items), 'run')} (newest first)")
    for name in ("run", "thread", "workflow", "status", "step", "updated (UTC)"):
        table.add_column(
            name,
            no_wrap=name in ("run", "status", "updated (UTC)"),
            overflow="fold",
            justify="right" if name == "step" else "left",
        )
    for shown in items:
        info, head = shown.info, shown.head
        thread = "=" if info.thread_id == info.run_id else info.thread_id
        workflow = info.workflow if head is None else f"{info.workflow} ({where(head.line)})"
        step = str(info.step) if head is None else _step(head)
        table.add_row(
            info.run_id, thread, workflow, run_status(info.status), step, when(info.updated_at)
        )
    out.print(table)
    out.print(
        Text(
            "langgraph: one namespace of a LangGraph thread (root or a subgraph), its status "
            "and step as its latest checkpoint says (interrupted: an interrupt() waits for "
            "an answer, savegame approvals; queued: answered, the graph takes it at "
            "graph.invoke(None, config))",
            style="dim",
        ),
        soft_wrap=True,
    )
    _missing(out, [r.head for r in items if r.head is not None])


def _missing(out: Console, found: Any) -> None:
    why = next((cp.missing for cp in found if cp.missing), None)
    if why:
        out.print(Text(f"LangGraph checkpoints not decoded: {why}", style="yellow"))


def run_json(shown: ShownRun) -> dict[str, Any]:
    """A run as ``savegame runs --json`` lists it: ``status`` the one shown everywhere, a
    LangGraph run's with LangGraph's reading of its latest checkpoint beside it."""
    body = jsonview.run(shown.info)
    if shown.head is None:
        return body
    body["langgraph"] = {**summary(shown.head), "stored_status": shown.stored.value}
    return body


def summary(cp: LangGraphCheckpoint) -> dict[str, Any]:
    """Where a LangGraph checkpoint is and what runs next, as JSON."""
    r = cp.reading
    return {
        "thread_id": cp.line.thread_id,
        "checkpoint_ns": cp.line.ns,
        "root": cp.line.root,
        "subgraph": list(cp.line.subgraph),
        "checkpoint_id": cp.lg_id,
        "parent_checkpoint_id": cp.parent_lg_id,
        "step": cp.step,
        "source": cp.source,
        "status": None if r is None else r.status,
        "next": None if r is None else [t.name for t in r.next],
        "to_run": None if r is None else [t.name for t in r.to_run],
        "decoded": r is not None,
        "missing": cp.missing,
    }


# -- history ------------------------------------------------------------------------------
def history(out: Console, line: ThreadLine, rows: Sequence[LangGraphCheckpoint]) -> None:
    title = (
        f"LangGraph thread {line.thread_id} ({where(line)}), run {line.run_id}: "
        f"{plural(len(rows), 'checkpoint')} (newest first)"
    )
    table = new_table(title)
    for name in ("step", "checkpoint_id", "next", "writes", "size", "created (UTC)"):
        table.add_column(
            name,
            no_wrap=name in ("checkpoint_id", "size", "created (UTC)"),
            overflow="fold" if name == "next" else "ellipsis",
            justify="right" if name == "size" else "left",
        )
    for i, cp in enumerate(rows):
        r = cp.reading
        step = Text(f"{_step(cp)} {cp.source or '?'}")
        step.append(_branch(rows, i), style="magenta")
        table.add_row(
            step,
            cp.lg_id,
            Text("?", style="dim") if r is None else (names(r.next) or Text("-", style="dim")),
            _writes(cp),
            size(cp.header.size),
            # Without the year: the table fits 96 columns with LangGraph's 36-character ids.
            cp.header.created_at.strftime("%m-%d %H:%M:%S"),
        )
    out.print(table)
    out.print(
        Text(
            f"step: LangGraph's step and source (⑂ N: a branch from step N); checkpoint_id: "
            f"LangGraph's, as its config takes it (savegame show ID --thread {line.thread_id})",
            style="dim",
        ),
        soft_wrap=True,
    )
    _missing(out, rows)


def _branch(rows: Sequence[LangGraphCheckpoint], i: int) -> str:
    """`` ⑂ N`` when row ``i``'s parent is not the next older row (``update_state``
    or a run from an older checkpoint: a branch), naming the parent by its step."""
    parent = rows[i].parent_lg_id
    if parent is None or i + 1 >= len(rows) or parent == rows[i + 1].lg_id:
        return ""
    origin = next((cp for cp in rows if cp.lg_id == parent), None)
    return f" ⑂ {_step(origin)}" if origin is not None else f" ⑂ {parent}"


def _writes(cp: LangGraphCheckpoint) -> Text:
    if cp.reading is None:
        return Text("?", style="dim")
    writes = cp.reading.writes
    if not writes:
        return Text("-", style="dim")
    text = Text(str(len(writes)))
    if any(w.interrupt for w in writes):
        text.append(" interrupt", style="yellow")
    if any(w.error for w in writes):
        text.append(" error", style="red")
    return text


def history_json(rows: Sequence[LangGraphCheckpoint]) -> list[dict[str, Any]]:
    return [{**jsonview.header(cp.header), "langgraph": summary(cp)} for cp in rows]


# -- show ---------------------------------------------------------------------------------
def checkpoint(out: Console, cp: LangGraphCheckpoint) -> None:
    h, r = cp.header, cp.reading
    out.print(
        Text.assemble(
            ("LangGraph checkpoint ", "bold"), (cp.lg_id, "bold"),
            f"  thread {cp.line.thread_id}, {where(cp.line)}",
        ),
        soft_wrap=True,
    )  # fmt: skip
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    rows: list[tuple[str, Any]] = [
        ("stored as", h.checkpoint_id),
        ("namespace", cp.line.ns or "(root)"),
        ("parent", cp.parent_lg_id or "-"),
        ("step", f"{_step(cp)} ({cp.source or '?'})"),
        ("created", when(h.created_at) + " UTC"),
        ("size", size(h.size)),
    ]
    if r is not None:
        rows.append(("status", status(cp)))
        rows.append(("next", names(r.next) or "-"))
        if r.to_run != r.next:
            rows.append(("still to run", names(r.to_run) or "-"))
    for name, v in rows:
        grid.add_row(name, v if isinstance(v, Text) else str(v))
    out.print(grid)
    if r is None:
        out.print(Text(f"channels not shown: {cp.missing}", style="yellow"))
        return
    out.print(Text("channels", style="bold"))
    for name, v in r.channels.items():
        _channel(out, name, v)
    for name in r.delta_channels:
        out.print(
            Text.assemble(
                f"  {name}  ", ("DeltaChannel: LangGraph rebuilds it from ancestors' writes", "dim")
            )
        )
    if not r.channels and not r.delta_channels:
        out.print(Text("  (none)", style="dim"))
    if r.writes:
        out.print(Text(f"pending writes ({len(r.writes)})", style="bold"))
        for w in r.writes:
            out.print(_write_line(w), soft_wrap=True)


def _channel(out: Console, name: str, v: Any) -> None:
    if _messages(v):
        out.print(f"  {name}  {plural(len(v), 'message')}")
        start = max(0, len(v) - ITEMS)
        if start:
            out.print(Text(f"    ... {start} earlier (--json shows all)", style="dim"))
        for i in range(start, len(v)):
            out.print(Text(f"    [{i}] {item(v[i])}"), soft_wrap=True)
        return
    out.print(Text(f"  {name}  {item(v)}"), soft_wrap=True)


def _write_line(w: PendingWrite) -> Text:
    task = "input" if w.node is None else f"task {w.node} ({w.task_id[:8]})"
    line = Text(f"  {task}  ")
    if w.interrupt:
        line.append("interrupt", style="yellow")
        for one in w.value if isinstance(w.value, list | tuple) else [w.value]:
            ident = getattr(one, "id", None)
            line.append(f" {ident}: " if ident else " ")
            line.append(item(getattr(one, "value", one), WIDTH - 40))
        return line
    if w.error:
        kind, message = getattr(w.value, "type", None), getattr(w.value, "message", None)
        shown = f"{kind}: {message}" if kind is not None else item(w.value)
        line.append(f"error {shown}", style="red")
        return line
    line.append(f"{w.channel} ", style="bold")
    line.append(item(w.value, WIDTH - 20) if w.value is not None else "-")
    return line


def checkpoint_json(cp: LangGraphCheckpoint) -> dict[str, Any]:
    body = {**jsonview.header(cp.header), "langgraph": summary(cp)}
    r = cp.reading
    if r is not None:
        body["langgraph"].update(
            channels=to_data(dict(r.channels), "channels"),
            delta_channels=list(r.delta_channels),
            metadata=to_data(dict(r.metadata), "metadata"),
            pending_writes=[
                {
                    "task_id": w.task_id,
                    "task_path": w.task_path,
                    "node": w.node,
                    "channel": w.channel,
                    "value": to_data(w.value, "value"),
                    "interrupt": w.interrupt,
                    "error": w.error,
                }
                for w in r.writes
            ],
        )
    return body


# -- diff ---------------------------------------------------------------------------------
def diff(out: Console, d: LangGraphDiff) -> None:
    for label, cp in (("from", d.a), ("  to", d.b)):
        out.print(
            f"{label} {cp.lg_id} (thread {cp.line.thread_id}, {where(cp.line)}, "
            f"step {_step(cp)}, {cp.source or '?'})",
            soft_wrap=True,
        )
    a, b = d.a.reading, d.b.reading
    assert a is not None and b is not None
    if names(a.next) != names(b.next):
        out.print(Text(f"  next: {names(a.next) or '-'} -> {names(b.next) or '-'}", style="yellow"))
    if a.delta_channels or b.delta_channels:
        delta = ", ".join(sorted({*a.delta_channels, *b.delta_channels}))
        out.print(Text(f"  not compared (DeltaChannel, no value stored): {delta}", style="dim"))
    changes(out, d.channels, show=item, what="channels")


def diff_json(d: LangGraphDiff) -> dict[str, Any]:
    return {
        **jsonview.diff(d.channels),
        "langgraph": {"a": summary(d.a), "b": summary(d.b)},
    }

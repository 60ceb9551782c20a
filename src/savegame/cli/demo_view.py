"""Rendering of ``savegame demo``: live progress lines, then the timeline, the side effects, the verdict."""

from __future__ import annotations

from collections.abc import Callable

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from savegame.cli import render
from savegame.cli.words import store_tail
from savegame.demo import DemoReport, Entry
from savegame.demo.driver import AFTER_CRASH
from savegame.model import RunStatus


def live(out: Console) -> Callable[[str], None]:
    def say(line: str) -> None:
        out.print(Text(f"- {line}", style="dim"), soft_wrap=True)

    return say


def ask(question: str) -> bool:
    import typer

    return typer.confirm(question, default=False)


def _short(ident: str) -> str:
    # The tail of an id is its random part: unique where the time prefix repeats.
    return "…" + ident[-8:]


def _row(table: Table, entry: Entry) -> None:
    style = "magenta" if entry.process == AFTER_CRASH else ""
    status = "" if entry.status in ("running", "completed") else entry.status
    table.add_row(
        str(entry.step),
        entry.node or Text("input", style="dim"),
        _short(entry.checkpoint_id),
        entry.next or Text("end", style="green"),
        Text(status, style=render.STATUS_STYLE.get(RunStatus(entry.status), "")),
        f"{entry.size:,}",
        "-" if entry.write_ms is None else f"{entry.write_ms:.2f}",
        Text(entry.process, style=style),
    )


_COLUMNS = (
    ("step", 4),
    ("node", 7),
    ("ckpt", 9),
    ("next", 7),
    ("status", 11),
    ("bytes", 6),
    ("ms", 5),
    ("written by", 10),
)


def _table(title: str | None) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    # Fixed widths: the tables before and after the crash line up as one timeline.
    for name, width in _COLUMNS:
        right = name in ("step", "bytes", "ms")
        table.add_column(name, justify="right" if right else "left", no_wrap=True, min_width=width)
    return table


def timeline(rep: DemoReport) -> Group:
    """The run's checkpoints, split where a person approved and where the kill landed."""
    before = _table(f"run {rep.run_id}: one run, three processes")
    after = _table(None)
    for entry in rep.timeline:
        _row(after if entry.process == AFTER_CRASH else before, entry)
    a, k = rep.approval, rep.kill
    call = ", ".join(f"{key}={value!r}" for key, value in a.arguments.items())
    return Group(
        before,
        Text.assemble(
            ("  ? approval ", "bold yellow"),
            f"{a.tool}({call}) approved {a.how}, by {a.by}",
        ),
        Text.assemble(
            ("  ✗ SIGKILL  ", "bold red"),
            f"process 2 (pid {k.pid}) resumed and was killed inside {k.tool}:\n"
            f"             the provider had refunded; journal entry {k.request_id} "
            f"was still {k.journal_status} (no result recorded)",
        ),
        after,
    )


def side_effects(rep: DemoReport) -> Table:
    """Every call the outside world received for the crashed run, from its own file."""
    table = Table(
        title="side effects: what the payment provider and the mail server saw",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title_justify="left",
    )
    for name in ("#", "service", "request id", "outcome", "record"):
        table.add_column(name, no_wrap=name != "record", overflow="fold")
    records = {r["request_id"]: r for r in rep.world.refunds}
    mails = {m["request_id"]: m for m in rep.world.emails}
    for call in rep.world.calls:
        rid = call["request_id"]
        if rid in records:
            r = records[rid]
            record = (
                f"refund {r['refund_id']}: ${r['amount']} for {r['order_id']} to {r['destination']}"
            )
        elif rid in mails:
            m = mails[rid]
            record = f"email {m['message_id']} to {m['recipient']}"
        else:
            record = ""
        style = "yellow" if call["outcome"] == "deduplicated" else ""
        table.add_row(
            str(call["seq"]), call["service"], rid, Text(call["outcome"], style=style), record
        )
    return table


def _verdict(rep: DemoReport) -> Text:
    refunds, emails = len(rep.world.refunds), len(rep.world.emails)
    once = f"{refunds} refund{'s' * (refunds != 1)} and {emails} confirmation email{'s' * (emails != 1)}"
    if rep.verdict:
        return Text.assemble(
            ("✓ verdict: ", "bold green"),
            f"exactly {once}, and the resumed run's final state equals the uninterrupted "
            f"run's byte for byte ({len(rep.final):,} bytes, sha256 {rep.final_sha[:16]}), "
            "usage equal too",
        )
    problems = []
    if not rep.once_each:
        problems.append(f"the outside world holds {once}, not one of each")
    if rep.final != rep.reference:
        where = next(
            (i for i, (a, b) in enumerate(zip(rep.final, rep.reference, strict=False)) if a != b),
            min(len(rep.final), len(rep.reference)),
        )
        problems.append(
            f"final state differs from the reference at byte {where} "
            f"(sha256 {rep.final_sha[:16]} vs {rep.reference_sha[:16]})"
        )
    elif rep.usage != rep.reference_usage:
        problems.append(f"usage differs: {rep.usage} vs {rep.reference_usage}")
    return Text.assemble(("✗ verdict: ", "bold red"), "; ".join(problems))


def report(out: Console, rep: DemoReport) -> None:
    out.print()
    out.print(timeline(rep))
    out.print(side_effects(rep))
    refund = rep.world.refunds[0] if rep.world.refunds else None
    if refund is not None:
        received = sum(1 for c in rep.world.calls if c["request_id"] == refund["request_id"])
        out.print(
            f"the provider received the refund request {received} times with request id "
            f"{refund['request_id']} (process 2, then process 3's retry of the in-doubt call) "
            f"and refunded once: {refund['refund_id']}",
            soft_wrap=True,
        )
    if rep.answer:
        out.print(
            Panel(rep.answer, title="final answer", title_align="left", expand=False, width=88)
        )
    secs = rep.seconds
    out.print(f"usage: {render.usage(rep.usage)}")
    waited = secs.get("approval", 0.0)
    out.print(
        f"time: three processes {secs.get('processes', 0):.2f} s, reference "
        f"{secs.get('reference', 0):.2f} s, total {secs.get('total', 0):.2f} s"
        + (f" (not counting the {waited:.1f} s the approval took)" if waited >= 0.05 else ""),
        soft_wrap=True,
    )
    out.print(
        f"reference: run {rep.reference_run_id}, uninterrupted, approved, same store, own thread",
        soft_wrap=True,
    )
    # soft_wrap keeps the verdict and the paths on one line each, for grep and copy-paste.
    out.print(_verdict(rep), soft_wrap=True)
    where(out, rep)


def where(out: Console, rep: DemoReport) -> None:
    """Where the demo's code is, and its store with the commands that look into it."""
    out.print(Text("the demo's code", style="bold"))
    for what, path in rep.code.items():
        out.print(f"  {path}  ({what})", soft_wrap=True)
    if rep.kept is None:
        out.print(f"the demo's files were deleted (--no-keep); its store was {rep.store_url}")
        return
    store = store_tail(rep.store_url).lstrip()
    out.print(Text("the demo's store, kept", style="bold"))
    out.print(f"  {rep.store_url}", soft_wrap=True)
    out.print(f"  files in {rep.kept} (delete the folder when done)", soft_wrap=True)
    for command in (
        f"savegame runs {store}",
        f"savegame history {rep.run_id} {store}",
        f"savegame effects {rep.run_id} {store}",
        f"savegame show {rep.run_id} {store}",
    ):
        out.print(f"  {command}", soft_wrap=True)

"""Rendering of ``savegame demo``: live progress lines, then the timeline and the verdict."""

from __future__ import annotations

from collections.abc import Callable

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from savegame.cli import render
from savegame.demo import DemoReport, Entry
from savegame.demo.driver import AFTER_CRASH


def live(out: Console) -> Callable[[str], None]:
    def say(line: str) -> None:
        out.print(Text(f"- {line}", style="dim"))

    return say


def _short(checkpoint_id: str) -> str:
    # The tail of an id is its random part: unique where the time prefix repeats.
    return "…" + checkpoint_id[-8:]


def _row(table: Table, entry: Entry) -> None:
    style = "magenta" if entry.process == AFTER_CRASH else ""
    table.add_row(
        str(entry.step),
        entry.node or Text("input", style="dim"),
        _short(entry.checkpoint_id),
        entry.next or Text("end", style="green"),
        f"{entry.size:,}",
        "-" if entry.write_ms is None else f"{entry.write_ms:.2f}",
        Text(entry.process, style=style),
    )


def timeline(report: DemoReport) -> Table:
    table = Table(
        title=f"run {report.run_id}: one run, two processes",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("step", justify="right")
    table.add_column("node")
    table.add_column("checkpoint", no_wrap=True)
    table.add_column("next")
    table.add_column("bytes", justify="right")
    table.add_column("write ms", justify="right")
    table.add_column("written by", no_wrap=True)
    for entry in report.timeline:
        _row(table, entry)
        if entry.process != AFTER_CRASH and entry.step == report.kill_after:
            table.add_section()
            table.add_row(
                Text("✗", style="bold red"),
                Text("SIGKILL", style="bold red"),
                Text(f"pid {report.killed_pid}", style="red"),
                "",
                "",
                "",
                Text(f"resume: pid {report.resumed_pid}", style="red"),
            )
            table.add_section()
    return table


def _verdict(report: DemoReport) -> Text:
    size = f"{len(report.final):,} bytes"
    if report.verdict:
        return Text.assemble(
            ("✓ verdict: ", "bold green"),
            "the resumed run's final state equals the uninterrupted run's byte for byte "
            f"({size}, sha256 {report.final_sha[:16]}), usage equal too",
        )
    if report.final != report.reference:
        where = next(
            (
                i
                for i, (a, b) in enumerate(zip(report.final, report.reference, strict=False))
                if a != b
            ),
            min(len(report.final), len(report.reference)),
        )
        detail = (
            f"final state differs from the reference at byte {where} "
            f"(sha256 {report.final_sha[:16]} vs {report.reference_sha[:16]})"
        )
    else:
        detail = f"usage differs: {report.usage} vs {report.reference_usage}"
    return Text.assemble(("✗ verdict: ", "bold red"), detail)


def report(out: Console, rep: DemoReport) -> None:
    out.print()
    out.print(timeline(rep))
    if rep.answer:
        out.print(
            Panel(rep.answer, title="final answer", title_align="left", expand=False, width=88)
        )
    secs = rep.seconds
    out.print(f"usage: {render.usage(rep.usage)}")
    out.print(
        f"time: first process {secs.get('first', 0):.2f} s, after-crash process "
        f"{secs.get('resume', 0):.2f} s, reference {secs.get('reference', 0):.2f} s, "
        f"total {secs.get('total', 0):.2f} s",
        soft_wrap=True,
    )
    out.print(f"reference: run {rep.reference_run_id}, uninterrupted, same store, own thread")
    # soft_wrap keeps the verdict and the paths on one line each, for grep and copy-paste.
    out.print(_verdict(rep), soft_wrap=True)
    if rep.db_path is not None:
        out.print(f"kept the database: {rep.db_path}", soft_wrap=True)
        out.print(f"  try: savegame history {rep.run_id} --store {rep.store_url}", soft_wrap=True)

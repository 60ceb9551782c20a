"""``savegame migrate langgraph`` through the real entry point: summary, --json, --dry-run,
--thread, --latest-only, the exit code of a skipped thread, and the progress bar."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from rich.console import Console

from savegame.cli import migrate_view
from savegame.langgraph import SavegameSaver, ThreadResult
from tests.integrations.langgraph.migrate_graphs import conf, sqlite_source


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    return path


def test_a_migration_prints_what_moved_and_the_bytes(
    cli: Any, source: Path, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    out = cli("migrate", "langgraph", str(source), "--to", target)
    assert out.exit_code == 0, out.stderr
    first, second = out.stdout.splitlines()[:2]
    assert first.startswith(
        f"migrated 3 threads (27 checkpoints, 78 pending writes) from {source} to {target} in "
    )
    assert "threads/s" in first
    assert second.startswith("bytes: ") and " in the source -> " in second
    again = cli("migrate", "langgraph", str(source), "--to", target)
    assert "already migrated (left as they are): 3" in again.stdout
    graph_state = SavegameSaver(target).get_tuple(conf("waiting"))
    assert graph_state is not None


def test_json_is_the_summary_with_one_entry_per_thread(
    cli: Any, source: Path, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    out = cli("migrate", "langgraph", str(source), "--to", target, "--json", "--thread", "waiting",
              "--thread", "done", "--latest-only")  # fmt: skip
    assert out.exit_code == 0, out.stderr
    got = out.json()
    assert got["threads"] == {"migrated": 2, "already": 0, "skipped": 0}
    assert got["latest_only"] is True and got["dry_run"] is False
    assert [(r["thread_id"], r["status"], r["checkpoints"]) for r in got["results"]] == [
        ("done", "migrated", 2),
        ("waiting", "migrated", 2),
    ]
    assert got["checkpoints"] == 4 and got["bytes_before"] > 0 and got["bytes_after"] > 0
    assert got["source_bytes"] == source.stat().st_size + (
        source.with_name(source.name + "-wal").stat().st_size
        if source.with_name(source.name + "-wal").exists()
        else 0
    )


def test_a_dry_run_says_what_would_move_and_makes_no_file(
    cli: Any, source: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target.db"
    out = cli("migrate", "langgraph", str(source), "--to", f"sqlite:///{target}", "--dry-run")
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("would migrate 3 threads (27 checkpoints")
    assert not target.exists()


def test_a_skipped_thread_is_named_with_why_and_exits_1(
    cli: Any, source: Path, tmp_path: Path
) -> None:
    conn = sqlite3.connect(source)
    conn.execute("UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'done'")
    conn.commit()
    conn.close()
    out = cli("migrate", "langgraph", str(source), "--to", f"sqlite:///{tmp_path / 't.db'}")
    assert out.exit_code == 1
    assert "skipped 1:" in out.stdout
    line = next(x for x in out.stdout.splitlines() if x.startswith("  done  "))
    assert "could not read it" in line and "pickle" in line and "(checkpoint " in line


def test_a_bad_type_is_a_usage_error(cli: Any, source: Path) -> None:
    out = cli("migrate", "langgraph", str(source), "--to", "memory://", "--type", "nocolon")
    assert out.exit_code == 2
    assert "--type 'nocolon' must look like module:Class" in out.stderr
    out = cli("migrate", "langgraph", str(source), "--to", "memory://", "--type", "os:sep")
    assert out.exit_code == 2 and "--type os:sep is a str, not a class" in out.stderr


def test_the_bar_shows_threads_their_rate_and_the_time_left() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with migrate_view.thread_bar(enabled=True, console=console) as hooks:
        assert hooks.on_start is not None and hooks.on_thread is not None
        hooks.on_start(4)
        for thread in ("a", "b", "c"):
            hooks.on_thread(ThreadResult(thread, "migrated"))
    shown = screen.getvalue()  # the last frame, drawn as the bar stops
    assert "3/4" in shown and "threads/s" in shown and "eta" in shown
    # Without a terminal (or under --json) there is no bar: nothing is called.
    with migrate_view.thread_bar(enabled=False) as hooks:
        assert hooks.on_start is None and hooks.on_thread is None

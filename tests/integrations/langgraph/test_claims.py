"""A migration's hold on a thread: a live holder keeps it, a dead one on this host is taken
over at once, an expired one from another host after its hold; a holder that lost it can
neither go on writing nor mark the thread done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from savegame.integrations.langgraph._claims import Claim, Claims, TakenOver, marker_id
from savegame.langgraph import SavegameSaver, migrate
from savegame.stores import Store, open_store
from tests.integrations.langgraph.migrate_graphs import conf, sqlite_saver, sqlite_source

HOLDER = textwrap.dedent(
    """
    import sys, time
    from savegame.integrations.langgraph._claims import Claims
    from savegame.stores import open_store

    Claims(open_store(sys.argv[1]), None, "elsewhere").take(sys.argv[2])
    print("HELD", flush=True)
    time.sleep(120)
    """
)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    return path


def status(report: object, thread: str) -> tuple[str, str | None]:
    result = next(r for r in report.results if r.thread_id == thread)  # type: ignore[attr-defined]
    return result.status, result.reason


def test_a_live_holder_keeps_the_thread_and_a_killed_one_is_taken_over(
    source: Path, sqlite_url: str
) -> None:
    open_store(sqlite_url).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, sqlite_url, "waiting"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "HELD\n"
        held, why = status(migrate(str(source), sqlite_url), "waiting")
        assert held == "skipped"
        assert f"being migrated by another process (PID {holder.pid} on host" in (why or "")
        assert list(SavegameSaver(sqlite_url).list(conf("waiting"))) == []
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
    # Its process is gone: the next migration takes the thread over at once.
    assert status(migrate(str(source), sqlite_url), "waiting") == ("migrated", None)
    with sqlite_saver(source) as lg:
        want = [t.config for t in lg.list(conf("waiting"))]
    assert [t.config for t in SavegameSaver(sqlite_url).list(conf("waiting"))] == want


def wait_expired(store: Store, thread: str) -> None:
    while True:
        lease = store.get_run(marker_id(thread)).lease
        if lease is None or lease.expires_at < time.time():
            return
        time.sleep(0.05)


def test_another_hosts_hold_is_taken_over_once_it_expired(source: Path, sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    away = Claims(store, None, "elsewhere", owner="otherhost:4242:1", ttl=60).take("done")
    assert isinstance(away, Claim)
    held, why = status(migrate(str(source), sqlite_url), "done")
    assert held == "skipped" and "PID 4242 on host otherhost" in (why or "")
    store.renew_lease(away.run_id, away.token, 0.05)  # its last renewal, then silence
    wait_expired(store, "done")
    assert status(migrate(str(source), sqlite_url), "done") == ("migrated", None)
    # The holder wakes up: it may neither renew nor mark the thread done.
    with pytest.raises(TakenOver):
        Claims(store, None, "elsewhere").renew(away, now=True)
    with pytest.raises(TakenOver):
        Claims(store, None, "elsewhere").finish(away, {"checkpoints": 0})
    head = store.list_checkpoints(marker_id("done"), limit=1)[0]
    assert head.metadata["phase"] == "done" and head.metadata["checkpoints"] == 8
    store.close()


def test_a_thread_abandoned_by_its_holder_is_gone_marker_and_all(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    claims = Claims(store, None, "here")
    claim = claims.take("t")
    assert isinstance(claim, Claim) and not claim.resumed
    undone: list[str] = []
    claims.abandon(claim, lambda: undone.append("t"))
    assert undone == ["t"]
    assert claims.marker("t").phase is None
    again = claims.take("t")
    assert isinstance(again, Claim) and not again.resumed
    claims.finish(again, {"checkpoints": 1})
    assert claims.marker("t").phase == "done"
    assert claims.take("t").phase == "done"  # type: ignore[union-attr]
    store.close()

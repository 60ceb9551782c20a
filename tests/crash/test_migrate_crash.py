"""``savegame migrate langgraph`` killed with SIGKILL anywhere in its writes, then run
again: every thread lands once, whole: as many checkpoints per thread as the source
has, one savegame run per namespace, nothing half written. And two migrations at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from savegame.client import verify
from savegame.integrations.langgraph._claims import marker_id
from savegame.langgraph import SavegameSaver, migrate
from savegame.stores import open_store
from tests.integrations.langgraph.migrate_graphs import conf, sqlite_saver, sqlite_source

pytestmark = pytest.mark.crash

HERE = Path(__file__).parent
CHILD = str(HERE / "migrate_workload.py")


def child(source: Path, target: str, method: str, nth: int, *go: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, CHILD, str(source), target, method, str(nth), *go],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def results(out: str) -> dict[str, str]:
    found = [orjson.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    return {r["thread"]: r["status"] for r in found}


def assert_each_thread_once(source: Path, target: str) -> None:
    saver = SavegameSaver(target)
    store = saver.store
    with sqlite_saver(source) as lg:
        threads = sorted({t.config["configurable"]["thread_id"] for t in lg.list(None)})
        for thread in threads:
            want = [t.config for t in lg.list(conf(thread))]
            got = [t.config for t in saver.list(conf(thread))]
            assert got == want, thread  # every checkpoint, each once, in order
            lines = [r for r in store.list_runs(thread_id=thread) if r.workflow == "langgraph"]
            namespaces = {c["configurable"]["checkpoint_ns"] for c in want}
            assert len(lines) == len(namespaces), thread  # one run per namespace, no leftovers
            head = store.list_checkpoints(marker_id(thread), limit=1)[0]
            assert head.metadata["phase"] == "done"
            assert head.metadata["checkpoints"] == len(want)
    assert verify(store=store).ok
    saver.close()


KILLS = [
    [("create_run", 1)],  # creating the first thread's marker
    [("create_run", 2)],  # the marker made, the thread's first run not
    [("put_checkpoint", 4)],  # in the middle of the first thread
    [("record_intents", 4)],  # among a checkpoint's pending writes (a task's at a time)
    [("run_sizes", 1)],  # the first thread written and verified, not marked done
    [("release_lease", 1)],  # marked done, its hold not let go
    [("put_checkpoint", 20)],  # in the third thread
    [("put_checkpoint", 9), ("delete_runs", 1)],  # and the rerun killed cleaning up
]


@pytest.mark.parametrize("kills", KILLS, ids=lambda k: "+".join(f"{m}{n}" for m, n in k))
def test_killed_anywhere_then_rerun_each_thread_lands_once(
    tmp_path: Path, kills: list[tuple[str, int]]
) -> None:
    source = tmp_path / "langgraph.db"
    sqlite_source(source)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    for method, nth in kills:
        proc = child(source, target, method, nth)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -9, err  # the kill happened, mid-migration
    done = migrate(str(source), target)
    assert {r.status for r in done.results} <= {"migrated", "already migrated"}
    assert_each_thread_once(source, target)
    assert {r.status for r in migrate(str(source), target).results} == {"already migrated"}


def test_two_migrations_at_once_write_each_thread_once(tmp_path: Path) -> None:
    source = tmp_path / "langgraph.db"
    for prefix in "abcde":
        sqlite_source(source, prefix=f"{prefix}-")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    open_store(target).close()
    go = tmp_path / "GO"
    procs = [child(source, target, "-", 0, str(go)) for _ in range(2)]
    go.touch()  # both start together
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    final = {r.thread_id: r.status for r in migrate(str(source), target).results}
    seen = [results(out) for out, _ in outs]
    for thread, status in final.items():
        by = [s[thread] for s in seen] + [status]
        # Migrated by exactly one of the three runs; the others found it done or held.
        assert by.count("migrated") == 1, (thread, by)
        assert set(by) <= {"migrated", "already migrated", "skipped"}, (thread, by)
    assert_each_thread_once(source, target)

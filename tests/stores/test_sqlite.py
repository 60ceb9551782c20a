"""What is specific to SQLite; behaviour shared by all stores is in test_contract.py."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from savegame.errors import ConfigurationError
from savegame.model import CheckpointRecord, EffectKind, EffectStatus
from savegame.stores import SqliteStore, open_store
from savegame.stores.base import PutResult
from savegame.stores.sqlite import parse_url
from savegame.stores.sqlite._statements import CLAIM, CLAIM_WOKEN, SQL
from savegame.testing.builders import OWNER, blob_digest, make_run, next_record

SRC = Path(__file__).resolve().parents[2] / "src"


def _pragma(store: SqliteStore, name: str) -> object:
    # synchronous is per connection, so it must be read on the store's own one.
    return store._conn.execute(f"PRAGMA {name}").fetchone()[0]


def test_wal_and_full_synchronous_by_default(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "synchronous") == 2  # FULL
        assert _pragma(store, "foreign_keys") == 1
        assert _pragma(store, "busy_timeout") == 30_000


def test_normal_synchronous_is_opt_in_through_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}?synchronous=normal"
    store = open_store(url)
    try:
        assert isinstance(store, SqliteStore)
        assert _pragma(store, "synchronous") == 1  # NORMAL
        assert store.url == url
    finally:
        store.close()


def test_blob_references_live_and_die_with_their_checkpoint(tmp_path: Path) -> None:
    """The reference table is what pruning reads; no row may outlive its checkpoint."""
    run, first = make_run()
    a, b = blob_digest(b"a"), blob_digest(b"b")
    with SqliteStore(tmp_path / "s.db") as store:
        lease = store.create_run(run, first, owner=OWNER, ttl=30)
        second = next_record(first, blobs=(b, a, b))
        store.put_checkpoint(second, lease_token=lease.token, blobs={a: b"a", b: b"b"})
        refs = "SELECT checkpoint_id, digest FROM checkpoint_blobs ORDER BY digest"
        assert store._conn.execute(refs).fetchall() == sorted(
            [(second.checkpoint_id, a), (second.checkpoint_id, b)], key=lambda r: r[1]
        )
        store.delete_checkpoints([second.checkpoint_id])
        assert store._conn.execute(refs).fetchall() == []


def test_pruning_blobs_uses_the_digest_index(tmp_path: Path) -> None:
    """Pruning must not scan every reference per blob."""
    sql = f"DELETE FROM blobs WHERE {SQL.unreferenced_blob}"
    with SqliteStore(tmp_path / "s.db") as store:
        plan = " ".join(row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "checkpoint_blobs_by_digest" in plan


@pytest.mark.parametrize(("workflows", "versions"), [(None, None), ('["contract"]', '["v1"]')])
def test_the_claim_of_woken_runs_uses_the_waking_index(
    tmp_path: Path, workflows: str | None, versions: str | None
) -> None:
    """A claim reads only waiting runs with a wake time, soonest first: a week-long sleep
    or a finished history is never looked at."""
    with SqliteStore(tmp_path / "s.db") as store:
        plan = store._conn.execute(
            "EXPLAIN QUERY PLAN " + CLAIM_WOKEN, (0.0, workflows, 0, versions)
        )
        details = " ".join(row[3] for row in plan)
    assert "USING INDEX runs_waking" in details
    assert "TEMP B-TREE" not in details


def test_the_wake_check_reads_the_pending_events_index(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        plan = store._conn.execute("EXPLAIN QUERY PLAN " + SQL.wake, ("r",))
        details = " ".join(row[3] for row in plan)
    assert "effects_pending_events" in details


@pytest.mark.parametrize(("workflows", "versions"), [(None, None), ('["contract"]', '["v1"]')])
def test_the_claim_query_uses_the_claimable_index(
    tmp_path: Path, workflows: str | None, versions: str | None
) -> None:
    """A claim reads only queued and running runs, oldest first, however long the history."""
    with SqliteStore(tmp_path / "s.db") as store:
        plan = store._conn.execute("EXPLAIN QUERY PLAN " + CLAIM, (0.0, workflows, 0, versions))
        details = " ".join(row[3] for row in plan)
    assert "USING INDEX runs_claimable" in details
    assert "TEMP B-TREE" not in details  # the index gives the order: no sort


def test_get_chain_is_one_statement(tmp_path: Path) -> None:
    run, first = make_run()
    with SqliteStore(tmp_path / "s.db") as store:
        lease = store.create_run(run, first, owner=OWNER, ttl=30)
        chain = [first]
        for _ in range(5):
            record = next_record(chain[0], base_id=chain[0].checkpoint_id)
            store.put_checkpoint(record, lease_token=lease.token)
            chain.insert(0, record)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            assert store.get_chain(chain[0].checkpoint_id) == chain
        finally:
            store._conn.set_trace_callback(None)
    assert len(statements) == 1


def test_stats_report_the_file_and_wal_size(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        run, first = make_run()
        store.create_run(run, first, owner=OWNER, ttl=30)
        stats = store.stats()
        on_disk = sum(
            os.path.getsize(p) for p in tmp_path.iterdir() if p.name in ("s.db", "s.db-wal")
        )
        assert stats.file_bytes == on_disk > 0


_RACER = textwrap.dedent(
    """
    import sys
    from savegame.errors import LeaseHeldError
    from savegame.stores import SqliteStore

    store = SqliteStore(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        lease = store.acquire_lease(sys.argv[2], sys.argv[3], 30.0)
        print("won", lease.token, flush=True)
    except LeaseHeldError:
        print("held", flush=True)
    finally:
        store.close()
    """
)


def test_processes_racing_for_one_lease_have_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    run, first = make_run()
    with SqliteStore(path) as store:
        store.create_run(run, first, owner=OWNER, ttl=0.0)  # expired at once: anyone may take it
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(path), run.run_id, f"racer:{i}:1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    try:
        # Start them together: each has its connection open before anyone acquires.
        for racer in racers:
            assert racer.stdout is not None
            assert racer.stdout.readline().strip() == "ready"
        outputs = [racer.communicate("go\n", timeout=60)[0].split() for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    assert all(racer.returncode == 0 for racer in racers)
    assert sorted(out[0] for out in outputs) == ["held", "held", "held", "won"]
    assert [out[1] for out in outputs if out[0] == "won"] == ["2"]
    with SqliteStore(path) as store:
        lease = store.get_run(run.run_id).lease
        assert lease is not None and lease.token == 2 and lease.owner.startswith("racer:")


@pytest.mark.parametrize(
    ("url", "path", "synchronous"),
    [
        ("sqlite:///savegame.db", "savegame.db", "full"),
        ("sqlite:///data/runs.db", "data/runs.db", "full"),
        ("sqlite:////var/lib/app/runs.db", "/var/lib/app/runs.db", "full"),
        ("sqlite:///runs.db?synchronous=normal", "runs.db", "normal"),
        ("sqlite:///runs.db?synchronous=FULL", "runs.db", "full"),
    ],
)
def test_url_parsing(url: str, path: str, synchronous: str) -> None:
    assert parse_url(url) == (path, synchronous)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://runs.db",  # a host, not a path
        "sqlite:///",
        "sqlite:///dir/",
        "sqlite:///runs.db?synchronous=off",
        "sqlite:///runs.db?journal=delete",
    ],
)
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"sqlite:///relative/path\.db|synchronous=full"):
        open_store(url)


def test_relative_urls_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///nested/runs.db").close()
    assert (tmp_path / "nested" / "runs.db").is_file()


def test_default_store_is_savegame_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SAVEGAME_STORE", raising=False)
    store = open_store()
    store.close()
    assert store.url == "sqlite:///savegame.db"
    assert (tmp_path / "savegame.db").is_file()


def test_the_environment_variable_names_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("SAVEGAME_STORE", url)
    store = open_store(None)
    store.close()
    assert store.url == url
    assert (tmp_path / "from-env.db").is_file()


@pytest.mark.parametrize(
    ("run_id", "kinds", "statuses", "prefix", "index"),
    [
        ("r1", None, None, None, "effects_by_run"),
        ("r1", [EffectKind.WRITE], None, None, "effects_by_run"),
        # A prefix is a range of the primary key (run_id, request_id), not a scan of the run.
        ("r1", None, None, "cp|", "sqlite_autoindex_effects_1 (run_id=? AND request_id>? AND"),
        ("r1", [EffectKind.READ], None, "c%_", "sqlite_autoindex_effects_1 (run_id=? AND"),
        (
            None,
            [EffectKind.APPROVAL, EffectKind.INTERRUPT],
            [EffectStatus.PENDING],
            None,
            "effects_by_kind_status",
        ),
    ],
)
def test_journal_listings_use_their_index(
    tmp_path: Path,
    run_id: str | None,
    kinds: list[EffectKind] | None,
    statuses: list[EffectStatus] | None,
    prefix: str | None,
    index: str,
) -> None:
    """A run's journal and the cross-run pending queries must not scan every entry ever made."""
    query = SQL.list_effects(run_id, kinds, statuses, prefix, 100)
    assert query is not None
    sql, params = query
    with SqliteStore(tmp_path / "s.db") as store:
        plan = " ".join(row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    assert f"USING INDEX {index}" in plan


def test_a_taken_checkpoint_id_conflicts_and_writes_nothing(tmp_path: Path) -> None:
    # The checkpoint row goes in first and its primary key refuses a taken id (no SELECT
    # before it): the head, the blobs and the journal stay as they were, alone or batched.
    from savegame.errors import ConflictError
    from savegame.stores.base import Put
    from savegame.testing.builders import make_effect

    with SqliteStore(tmp_path / "s.db") as store:
        run, first = make_run()
        lease = store.create_run(run, first, owner=OWNER, ttl=30.0)
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        clash = next_record(second, checkpoint_id=first.checkpoint_id)
        with pytest.raises(ConflictError, match="exists already"):
            store.put_checkpoint(
                clash, lease_token=lease.token, effects=[make_effect(run.run_id)],
                blobs={blob_digest(b"x"): b"x"},
            )  # fmt: skip
        third = next_record(second)
        done = store.put_checkpoints([Put(clash, lease.token), Put(third, lease.token)])
        assert isinstance(done[0], ConflictError) and not isinstance(done[1], Exception)
        assert store.get_run(run.run_id).head_checkpoint_id == third.checkpoint_id
        assert store.list_effects(run.run_id) == []
        assert store._conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0
        assert [h.checkpoint_id for h in store.list_checkpoints(run.run_id)] == [
            third.checkpoint_id, second.checkpoint_id, first.checkpoint_id,
        ]  # fmt: skip


def _statements_of(store: SqliteStore, write: Callable[[], object]) -> list[str]:
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    try:
        write()
    finally:
        store._conn.set_trace_callback(None)
    return [s.split()[0] for s in seen]


def test_a_step_s_put_is_one_update_and_one_insert(tmp_path: Path) -> None:
    """The usual step: the head's UPDATE fences, moves the head and finds the cancel flag
    clear at once, so no SELECT of the flag follows; once a cancel is asked, the put takes
    the long way and still reports it."""
    run, first = make_run()
    with SqliteStore(tmp_path / "s.db") as store:
        lease = store.create_run(run, first, owner=OWNER, ttl=30)
        second = next_record(first)
        got: list[PutResult] = []

        def put(record: CheckpointRecord) -> None:
            got.append(store.put_checkpoint(record, lease_token=lease.token))

        assert _statements_of(store, lambda: put(second)) == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]
        store.request_cancel(run.run_id)
        third = next_record(second)
        long_way = _statements_of(store, lambda: put(third))
        assert got == [PutResult(False), PutResult(True)]
        assert long_way == ["BEGIN", "UPDATE", "SELECT", "UPDATE", "INSERT", "SELECT", "COMMIT"]
        head = store.get_run(run.run_id)
        assert (head.head_checkpoint_id, head.cancel_requested) == (third.checkpoint_id, True)


def test_a_batch_takes_no_savepoint_a_put_until_one_is_refused(tmp_path: Path) -> None:
    """A batch is written optimistically, two statements a put; a refusal anywhere in it
    (here the last put's, after two puts of other runs were written) rolls it back whole,
    and the batch is written again put by put under savepoints: the others once each,
    the refused one not at all, its error in its place."""
    from savegame.errors import LeaseLostError
    from savegame.stores.base import Put

    with SqliteStore(tmp_path / "s.db") as store:
        runs = [make_run() for _ in range(3)]
        leases = [store.create_run(run, first, owner=OWNER, ttl=30) for run, first in runs]
        seconds = [next_record(first) for _, first in runs]
        puts = [Put(record, lease.token) for record, lease in zip(seconds, leases, strict=True)]
        clean = _statements_of(store, lambda: store.put_checkpoints(puts))
        assert clean == ["BEGIN", *["UPDATE", "INSERT"] * 3, "COMMIT"]
        thirds = [next_record(second) for second in seconds]
        stale = Put(thirds[2], leases[2].token + 1)
        got: list[object] = []
        again = _statements_of(
            store, lambda: got.extend(store.put_checkpoints([Put(thirds[0], leases[0].token),
                                                            Put(thirds[1], leases[1].token),
                                                            stale]))
        )  # fmt: skip
        assert [type(x) for x in got] == [PutResult, PutResult, LeaseLostError]
        assert again.count("BEGIN") == 2 and again.count("ROLLBACK") >= 1
        assert again.count("SAVEPOINT") == 3
        for (run, first), second, third, written in zip(
            runs, seconds, thirds, (True, True, False), strict=True
        ):
            head = third if written else second
            assert store.get_run(run.run_id).head_checkpoint_id == head.checkpoint_id
            stored = [h.checkpoint_id for h in store.list_checkpoints(run.run_id)]
            assert stored == [
                *([third.checkpoint_id] if written else []), second.checkpoint_id,
                first.checkpoint_id,
            ]  # fmt: skip


def test_a_write_transaction_that_fails_rolls_back_and_frees_the_store(tmp_path: Path) -> None:
    """A failure in the block, and one at COMMIT (a deferred foreign key), each roll back
    and release the store's lock: the next write goes through."""
    run, first = make_run()
    with SqliteStore(tmp_path / "s.db") as store:
        lease = store.create_run(run, first, owner=OWNER, ttl=30)
        with pytest.raises(RuntimeError, match="boom"), store._tx() as conn:
            conn.execute("UPDATE runs SET step = 99")
            raise RuntimeError("boom")
        with pytest.raises(sqlite3.IntegrityError), store._tx() as conn:
            conn.execute("PRAGMA defer_foreign_keys = ON")
            conn.execute("UPDATE runs SET step = 98")
            conn.execute("INSERT INTO checkpoint_blobs (checkpoint_id, digest) VALUES ('no', 'x')")
        assert not store._conn.in_transaction
        assert store.get_run(run.run_id).step == first.header.step
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        assert store.get_run(run.run_id).head_checkpoint_id == second.checkpoint_id


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite:///runs.db?synchronous=off", "synchronous=off is not allowed"),
        ("sqlite:///runs.db?journal=delete", "unknown option journal"),
    ],
)
def test_a_bad_url_option_is_named_for_what_is_wrong(url: str, says: str) -> None:
    # synchronous is a known option: an unsupported value must not be called unknown.
    with pytest.raises(ConfigurationError, match=says):
        open_store(url)


def test_bytes_and_none_are_bound_as_they_are() -> None:
    # The store registers pass-through adapters for bytes and None (sqlite3 adapts both,
    # at a raised and cleared AttributeError each): the values bound are the same.
    import savegame.stores.sqlite._store  # noqa: F401  (registers them on import)

    for kind in (bytes, type(None)):
        assert (kind, sqlite3.PrepareProtocol) in sqlite3.adapters
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c)")
    conn.execute("INSERT INTO t VALUES (?, ?, ?)", (b"\x00\xffpayload", None, b""))
    row = conn.execute("SELECT a, typeof(a), b, typeof(b), c, typeof(c) FROM t").fetchone()
    assert row == (b"\x00\xffpayload", "blob", None, "null", b"", "blob")


def test_an_adapter_of_the_process_is_kept() -> None:
    # The registry is the sqlite3 module's: a program's own adapter for bytes stays.
    script = textwrap.dedent(
        """
        import sqlite3
        mine = lambda value: b"mine:" + value
        sqlite3.register_adapter(bytes, mine)
        import savegame.stores.sqlite._store
        assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is mine
        assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env)

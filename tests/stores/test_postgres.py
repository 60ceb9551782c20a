"""What is specific to PostgreSQL: migrations under concurrency, row locks, the pool, URLs.

Store behaviour shared by every backend is in the contract suite (test_contract.py);
these tests need a server (SAVEGAME_TEST_POSTGRES) and skip without one, unless
SAVEGAME_REQUIRE_SERVICES=1 (CI), where a missing server fails them (tests/services.py).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseHeldError,
    LeaseLostError,
    NotFoundError,
)
from savegame.model import EffectKind, EffectStatus, Lease, RunStatus, Waiting
from savegame.stores import open_store
from savegame.stores.base import Put, PutResult
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    blob_digest,
    make_effect,
    make_run,
    next_record,
)
from tests import services

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from savegame.stores.postgres import (  # noqa: E402
    PostgresStore,
    _arrays,
    _schema,
    parse_url,
)
from savegame.stores.postgres._statements import CLAIM, CLAIM_WOKEN, MOVE_HEADS, SQL  # noqa: E402
from savegame.stores.postgres._store import _Sent  # noqa: E402

TTL = 30.0
BASE_URL = services.POSTGRES_URL
CONNINFO = parse_url(BASE_URL)[0]


@pytest.fixture(scope="module", autouse=True)
def _server() -> None:
    services.postgres_conninfo()


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name; the schema is dropped after the test."""
    with services.postgres_schema() as name:
        yield name


@pytest.fixture
def url(schema: str) -> str:
    return services.postgres_url(schema)


def _versions(schema: str) -> list[int]:
    with psycopg.connect(CONNINFO, autocommit=True) as conn:
        rows = conn.execute(f'SELECT version FROM "{schema}".savegame_schema ORDER BY 1').fetchall()
    return [row[0] for row in rows]


def _all_versions() -> list[int]:
    return list(range(1, _schema.SCHEMA_VERSION + 1))


# -- migrations ---------------------------------------------------------------------
def test_migrations_are_applied_once_and_reopening_is_a_no_op(url: str, schema: str) -> None:
    PostgresStore.from_url(url).close()
    PostgresStore.from_url(url).close()
    assert _versions(schema) == _all_versions()
    with psycopg.connect(CONNINFO, autocommit=True) as conn:
        assert _schema.migrate(conn, schema) == _schema.SCHEMA_VERSION


def test_threads_opening_a_fresh_schema_at_once_migrate_it_once(url: str, schema: str) -> None:
    openers = 6
    barrier = threading.Barrier(openers)
    errors: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresStore.from_url(url).close()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=open_one) for _ in range(openers)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert _versions(schema) == _all_versions()


def test_processes_opening_a_fresh_schema_at_once_migrate_it_once(url: str, schema: str) -> None:
    code = "import sys; from savegame.stores import open_store; open_store(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, url]) for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    assert _versions(schema) == _all_versions()
    with PostgresStore.from_url(url) as store:
        assert store.stats().runs == 0


def test_migrate_runs_inside_the_callers_transaction(schema: str) -> None:
    with psycopg.connect(
        CONNINFO
    ) as conn:  # not autocommit: the first statement opens a transaction
        conn.execute("SELECT 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert _schema.migrate(conn, schema) == 0
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert conn.execute(f'SELECT count(*) FROM "{schema}".runs').fetchone() == (0,)
        conn.rollback()  # the caller's rollback takes the migration with it
        missing = conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()
        assert missing == (None,)
        conn.execute("SELECT 1")
        _schema.migrate(conn, schema)
        conn.commit()
    assert _versions(schema) == _all_versions()


def test_a_schema_from_a_newer_savegame_is_refused(url: str, schema: str) -> None:
    PostgresStore.from_url(url).close()
    with psycopg.connect(CONNINFO, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".savegame_schema (version) VALUES (999)')
    before = set(threading.enumerate())
    with pytest.raises(ConfigurationError, match="upgrade savegame"):
        PostgresStore.from_url(url)
    # The pool, opened while the schema was checked, is closed with the refusal.
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("savegame-")]


# -- leases and fencing across store instances -----------------------------------------
def _race(stores: list[PostgresStore], run_id: str) -> tuple[list[Lease], list[LeaseHeldError]]:
    """Every store tries to take the run at once, each from its own thread and connection."""
    barrier = threading.Barrier(len(stores))
    won: list[Lease] = []
    held: list[LeaseHeldError] = []

    def contend(store: PostgresStore, owner: str) -> None:
        barrier.wait()
        try:
            won.append(store.acquire_lease(run_id, owner, TTL))
        except LeaseHeldError as exc:
            held.append(exc)

    workers = [
        threading.Thread(target=contend, args=(store, f"host:{i}:1"))
        for i, store in enumerate(stores)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return won, held


def test_two_stores_racing_for_one_lease_have_exactly_one_winner(url: str) -> None:
    with PostgresStore.from_url(url) as a, PostgresStore.from_url(url) as b:
        for _ in range(10):
            run, first = make_run()
            a.create_run(run, first, owner=OWNER, ttl=0.0)
            won, held = _race([a, b], run.run_id)
            assert (len(won), len(held)) == (1, 1)
            assert won[0].token == 2
            assert b.get_run(run.run_id).lease == won[0]


def test_a_stale_writer_waits_for_the_takeover_then_is_rejected(url: str) -> None:
    """The fence reads the token under the run row's lock, so it sees a takeover that commits meanwhile."""
    with PostgresStore.from_url(url) as old, PostgresStore.from_url(url) as new:
        run, first = make_run()
        stale_lease = old.create_run(run, first, owner=OWNER, ttl=0.0)
        stale, fresh = next_record(first), next_record(first)
        outcome: list[BaseException | None] = []
        with psycopg.connect(parse_url(url)[0]) as takeover:
            # A takeover in flight: the row is locked and the token moved, not yet committed.
            takeover.execute(
                f'UPDATE "{new.schema}".runs SET lease_token = lease_token + 1 WHERE run_id = %s',
                (run.run_id,),
            )

            def write() -> None:
                try:
                    old.put_checkpoint(stale, lease_token=stale_lease.token)
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            writer = threading.Thread(target=write)
            writer.start()
            writer.join(0.3)
            assert writer.is_alive(), "the stale writer must wait for the row lock"
            takeover.commit()
            writer.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], LeaseLostError)
        new_lease = new.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        assert new_lease.token == stale_lease.token + 2
        new.put_checkpoint(fresh, lease_token=new_lease.token)
        with pytest.raises(LeaseLostError):
            old.put_checkpoint(stale, lease_token=stale_lease.token)
        assert old.latest_checkpoint(run.run_id) == fresh
        assert [h.checkpoint_id for h in old.list_checkpoints(run.run_id)] == [
            fresh.checkpoint_id,
            first.checkpoint_id,
        ]


# -- the worker fleet's queue ------------------------------------------------------------------
def _submit(store: PostgresStore) -> str:
    run, first = make_run()
    store.create_run(run, first, owner=None, ttl=TTL)
    return run.run_id


def test_a_claim_skips_a_locked_run_instead_of_waiting(url: str) -> None:
    """SKIP LOCKED: the oldest run is held by another transaction, so the claim takes the next."""
    with PostgresStore.from_url(url) as store:
        oldest, newer = _submit(store), _submit(store)
        with psycopg.connect(parse_url(url)[0]) as other:
            other.execute(
                f'SELECT 1 FROM "{store.schema}".runs WHERE run_id = %s FOR UPDATE', (oldest,)
            )
            started = time.monotonic()
            lease = store.claim_run(OWNER, TTL)
            assert time.monotonic() - started < 2
            assert lease is not None and lease.run_id == newer
            assert store.claim_run(OWNER, TTL) is None
            other.rollback()
        lease = store.claim_run(OWNER, TTL)
        assert lease is not None and lease.run_id == oldest


def test_the_claim_query_uses_the_claimable_index(url: str) -> None:
    with PostgresStore.from_url(url) as store, psycopg.connect(parse_url(url)[0]) as conn:
        for _ in range(3):
            _submit(store)
        conn.execute(f'SET search_path TO "{store.schema}"')
        conn.execute("SET enable_seqscan = off")
        for workflows, versions in ((None, None), (["contract"], ["v1"])):
            plan = conn.execute("EXPLAIN " + CLAIM, {"workflows": workflows, "versions": versions})
            assert "runs_claimable" in " ".join(row[0] for row in plan.fetchall())


def test_the_claim_of_woken_runs_uses_the_waking_index(url: str) -> None:
    with PostgresStore.from_url(url) as store, psycopg.connect(parse_url(url)[0]) as conn:
        conn.execute(f'SET search_path TO "{store.schema}"')
        conn.execute("SET enable_seqscan = off")
        for workflows, versions in ((None, None), (["contract"], ["v1"])):
            which = {"workflows": workflows, "versions": versions, "now": 0}
            plan = conn.execute("EXPLAIN " + CLAIM_WOKEN, which)
            assert "runs_waking" in " ".join(row[0] for row in plan.fetchall())
        plan = conn.execute("EXPLAIN " + SQL.wake, ("r",))
        assert "effects_pending_events" in " ".join(row[0] for row in plan.fetchall())


def test_a_request_prefix_reads_a_range_of_the_primary_key(url: str) -> None:
    """One checkpoint's writes of a long journal, on a fresh table (no statistics yet):
    the range is the index condition of effects_pkey, not a filter over the whole run."""
    with PostgresStore.from_url(url) as store, psycopg.connect(CONNINFO) as conn:
        run, first = make_run()
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
        for i in range(300):
            effect = make_effect(run.run_id, f"{i:05d}|task|0", kind=EffectKind.READ)
            store.record_intent(effect, lease_token=lease.token)
        query = store._sql.list_effects(run.run_id, [EffectKind.READ], None, "00150|", 10**9)
        assert query is not None
        conn.execute(f'SET search_path TO "{store.schema}"')
        plan = " ".join(row[0] for row in conn.execute("EXPLAIN " + query[0], query[1]))
        assert "Index Scan using effects_pkey" in plan, plan
        assert "request_id >= '00150|'" in plan and "request_id < '00150}'" in plan
        found = store.list_effects(run.run_id, request_prefix="00150|")
        assert [e.request_id for e in found] == ["00150|task|0"]


def test_a_put_waits_for_a_blob_collection_then_sees_the_blob_gone(url: str) -> None:
    """The missing-blob check runs after the table lock a collection holds, never before it."""
    with PostgresStore.from_url(url) as store:
        gone, gone_first = make_run()
        gone_first = replace(gone_first, header=replace(gone_first.header, blobs=("d",)))
        store.create_run(gone, gone_first, owner=OWNER, ttl=TTL, blobs={"d": b"x"})
        store.delete_runs([gone.run_id])  # "d" is unreferenced now, up for collection
        run, first = make_run()
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
        late = next_record(first, blobs=("d",))  # its writer believes "d" is stored
        outcome: list[BaseException | None] = []
        with psycopg.connect(parse_url(url)[0]) as collector:
            # A collection in flight: the table lock taken, the blob deleted, not yet committed.
            collector.execute(f'LOCK TABLE "{store.schema}".checkpoint_blobs IN SHARE MODE')
            collector.execute(f'DELETE FROM "{store.schema}".blobs WHERE digest = %s', ("d",))

            def write() -> None:
                try:
                    store.put_checkpoint(late, lease_token=lease.token)
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            writer = threading.Thread(target=write)
            writer.start()
            writer.join(0.3)
            assert writer.is_alive(), "the writer must wait for the collection's table lock"
            collector.commit()
            writer.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], ConflictError)
        assert store.latest_checkpoint(run.run_id) == first
        store.put_checkpoint(late, lease_token=lease.token, blobs={"d": b"x"})
        assert store.get_blobs(["d"]) == {"d": b"x"}


# -- the pool -----------------------------------------------------------------------------
def test_an_exhausted_pool_makes_callers_wait_then_time_out(url: str) -> None:
    pool_timeout = 0.5
    with PostgresStore.from_url(f"{url}&pool_max=1&pool_timeout={pool_timeout}") as store:
        run, first = make_run()
        store.create_run(run, first, owner=OWNER, ttl=TTL)
        results: list[Any] = []
        with store._pool.connection():  # the only connection, held by someone else
            waiter = threading.Thread(target=lambda: results.append(store.get_run(run.run_id)))
            waiter.start()
            waiter.join(0.1)
            assert waiter.is_alive(), "a call must wait for a free connection"
        waiter.join(5)
        assert [r.run_id for r in results] == [run.run_id]

        with store._pool.connection():
            started = time.monotonic()
            with pytest.raises(psycopg.OperationalError, match="couldn't get a connection"):
                store.get_run(run.run_id)  # PoolTimeout is an OperationalError
            assert time.monotonic() - started >= pool_timeout * 0.9
        assert store.get_run(run.run_id).run_id == run.run_id  # the pool recovers


# -- URLs ---------------------------------------------------------------------------------
def test_url_never_carries_the_password(schema: str) -> None:
    parts = BASE_URL.split("://", 1)[1]
    netloc, rest = parts.split("/", 1) if "/" in parts else (parts, "")
    hostport = netloc.rsplit("@", 1)[-1]
    # Trust auth ignores the password, so the store opens and its url can be checked.
    with_secret = f"postgres://postgres:s3cret-pw@{hostport}/{rest}"
    sep = "&" if "?" in with_secret else "?"
    store = open_store(f"{with_secret}{sep}schema={schema}&pool_max=3&password=other-secret")
    try:
        assert isinstance(store, PostgresStore)
        assert "s3cret" not in store.url and "other-secret" not in store.url
        assert "s3cret" not in repr(store)
        assert store.url.startswith("postgresql://postgres@")
        assert f"schema={schema}" in store.url and "pool_max=3" in store.url
        with PostgresStore.from_url(store.url) as again:  # the url reopens the same data
            assert again.url == store.url
    finally:
        store.close()


def test_a_keyword_conninfo_gets_a_url_too(schema: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(CONNINFO)
    params["password"] = "s3cret"
    conninfo = psycopg.conninfo.make_conninfo(**params)
    with PostgresStore(conninfo, schema=schema) as store:
        assert "s3cret" not in store.url
        assert store.url.startswith("postgresql://")


def test_unreachable_server_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot open the store"):
        open_store("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")


@pytest.mark.parametrize(
    "query",
    [
        "pool_max=abc",
        "pool_min=5&pool_max=2",
        "pool_timeout=0",
        "prepare_threshold=abc",
        "prepare_threshold=-1",
    ],
)
def test_bad_pool_options_are_configuration_errors(query: str) -> None:
    with pytest.raises(ConfigurationError):
        open_store(f"postgresql://postgres@127.0.0.1:1/test?{query}")


# -- data the jsonb type would not keep -------------------------------------------------------
def test_metadata_keeps_nul_characters_and_key_order(url: str) -> None:
    with PostgresStore.from_url(url) as store:
        run, first = make_run(metadata={"z": "a\x00b", "a": 1e20})
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
        second = next_record(first, metadata={"b": "x\x00", "a": 1.0, "k": "v"})
        store.put_checkpoint(second, lease_token=lease.token)
        got = store.get_run(run.run_id).metadata
        assert list(got) == ["z", "a"] and got["z"] == "a\x00b" and isinstance(got["a"], float)
        headers = store.list_checkpoints(run.run_id, metadata={"k": "v", "a": 1})
        assert [h.checkpoint_id for h in headers] == [second.checkpoint_id]
        assert store.get_checkpoint(second.checkpoint_id).header.metadata["b"] == "x\x00"


# -- group commit's pipelined batch (PostgresStore.put_checkpoints) -----------------------------
def _started(store: PostgresStore, n: int) -> list[tuple[Any, Any, Lease]]:
    out = []
    for _ in range(n):
        run, first = make_run()
        out.append((run, first, store.create_run(run, first, owner=OWNER, ttl=TTL)))
    return out


def test_a_batch_of_plain_and_other_puts_is_written_in_one_pipeline(url: str) -> None:
    """Plain puts (MOVE_HEADS, INSERT_CHECKPOINTS) beside a put with a journal entry, one
    with blobs, one waiting and two of one run: all through _pipelined, none refused."""
    with PostgresStore.from_url(url) as store:
        started = _started(store, 5)
        (_a, a0, la), (b, b0, lb), (_c, c0, lc), (d, d0, ld), (_e, e0, le) = started
        data = b"blob bytes"
        digest = blob_digest(data)
        puts = [
            Put(next_record(a0), la.token),
            Put(next_record(b0), lb.token, effects=[make_effect(b.run_id, "req-b")]),
            Put(next_record(c0, blobs=(digest,)), lc.token, blobs={digest: data}),
            Put(
                next_record(d0, status=RunStatus.WAITING),
                ld.token,
                waiting=Waiting(topics=("go",), need=1),
            ),
        ]
        e1 = next_record(e0)
        puts += [Put(e1, le.token), Put(next_record(e1), le.token)]
        written = store._pipelined([_Sent.of(put) for put in puts])
        assert written is not None and all(isinstance(w, PutResult) for w in written)
        for put in puts:
            assert store.get_checkpoint(put.record.checkpoint_id) == put.record
        for (run, _, _), put in zip(started, puts[:4] + puts[5:], strict=True):
            assert store.get_run(run.run_id).head_checkpoint_id == put.record.checkpoint_id
        assert store.get_effect(b.run_id, "req-b") == puts[1].effects[0]
        assert store.get_blobs([digest]) == {digest: data}
        assert store.get_run(d.run_id).status == RunStatus.WAITING


@pytest.mark.parametrize("stale", ["plain", "waiting"])
def test_a_stale_token_in_a_pipelined_batch_refuses_its_put_alone(url: str, stale: str) -> None:
    """The pipeline sees the fence miss in its results, rolls back, and the batch is
    written again one put at a time: the stale put gets LeaseLostError, the others land."""
    with PostgresStore.from_url(url) as store:
        (a, a0, la), (b, b0, lb), (c, c0, lc) = _started(store, 3)
        victim = a if stale == "plain" else b
        store.acquire_lease(victim.run_id, OTHER_OWNER, TTL, takeover_token=1)
        puts = [
            Put(next_record(a0), la.token),
            Put(
                next_record(b0, status=RunStatus.WAITING),
                lb.token,
                waiting=Waiting(topics=("go",), need=1),
            ),
            Put(next_record(c0), lc.token, effects=[make_effect(c.run_id, "req-c")]),
        ]
        got = store.put_checkpoints(puts)
        lost = 0 if stale == "plain" else 1
        assert isinstance(got[lost], LeaseLostError)
        assert [type(x) for i, x in enumerate(got) if i != lost] == [PutResult, PutResult]
        assert (
            store.get_run(victim.run_id).head_checkpoint_id
            == (a0 if lost == 0 else b0).checkpoint_id
        )
        with pytest.raises(NotFoundError):
            store.get_checkpoint(puts[lost].record.checkpoint_id)
        assert store.get_effect(c.run_id, "req-c") == puts[2].effects[0]


def test_a_statement_failing_mid_pipeline_fails_its_put_alone(url: str) -> None:
    """A put for a run that does not exist fails on the server (its checkpoint's foreign
    key) in the middle of the pipeline; the batch is written again one by one, that put
    gets NotFoundError and the others commit. The pool's connection stays usable."""
    with PostgresStore.from_url(url + "&pool_max=1") as store:
        (a, a0, la), (b, b0, lb) = _started(store, 2)
        _ghost, ghost_first = make_run()
        got = store.put_checkpoints(
            [
                Put(next_record(a0), la.token),
                Put(next_record(ghost_first), 1),
                Put(next_record(b0), lb.token),
            ]
        )
        assert isinstance(got[1], NotFoundError)
        assert [type(got[0]), type(got[2])] == [PutResult, PutResult]
        assert store.get_run(a.run_id).head_checkpoint_id != a0.checkpoint_id
        assert store.get_run(b.run_id).head_checkpoint_id != b0.checkpoint_id
        a1 = store.latest_checkpoint(a.run_id)
        assert isinstance(store.put_checkpoints([Put(next_record(a1), la.token)])[0], PutResult)


def test_a_batch_with_an_event_is_written_one_put_at_a_time(url: str) -> None:
    """An event's writes branch on what they read (a missing run is skipped): such a
    batch is not pipelined, and the event reaches its run with the put."""
    with PostgresStore.from_url(url) as store:
        (_a, a0, la), (b, b0, lb) = _started(store, 2)
        sent = make_effect(b.run_id, "event:go:1", kind=EffectKind.EVENT, name="go")
        puts = [Put(next_record(a0), la.token, events=[sent]), Put(next_record(b0), lb.token)]
        assert store._pipelined([_Sent.of(put) for put in puts]) is None
        got = store.put_checkpoints(puts)
        assert [type(x) for x in got] == [PutResult, PutResult]
        assert store.get_effect(b.run_id, "event:go:1").name == "go"


def test_the_batch_head_move_reads_the_primary_key(url: str) -> None:
    with PostgresStore.from_url(url) as store, psycopg.connect(parse_url(url)[0]) as conn:
        conn.execute(f'SET search_path TO "{store.schema}"')
        conn.execute("SET enable_seqscan = off")
        ids = ["r1", "r2"]
        params = [["c1", "c2"], ["running"] * 2, [1, 1], [None] * 2, [0, 0], [None] * 2,
                  [0, 0], ids, [1, 1], ids]  # fmt: skip
        plan = conn.execute("EXPLAIN " + MOVE_HEADS, params)
        assert "runs_pkey" in " ".join(row[0] for row in plan.fetchall())


def test_the_batch_journal_keeps_entries_as_one_put_at_a_time_would(url: str) -> None:
    """UPSERT_EFFECTS follows UPSERT_EFFECT's rule: a pending entry stays, a NOT_DONE one
    is replaced, a new one goes in. A request id twice in one put fails the statement;
    written again one by one, the first of the two stays, as put_checkpoint keeps it."""
    with PostgresStore.from_url(url) as store:
        (a, a0, la), (b, b0, lb) = _started(store, 2)
        kept = make_effect(a.run_id, "kept", arguments=b"old")
        redo = make_effect(a.run_id, "redo", status=EffectStatus.NOT_DONE, arguments=b"old")
        a1 = next_record(a0)
        store.put_checkpoint(a1, lease_token=la.token, effects=[kept, redo])
        again = [
            make_effect(a.run_id, "kept", arguments=b"new"),
            make_effect(a.run_id, "redo", arguments=b"new"),
            make_effect(a.run_id, "fresh", arguments=b"new"),
        ]
        twice = [make_effect(b.run_id, "twice", arguments=b"one"),
                 make_effect(b.run_id, "twice", arguments=b"two")]  # fmt: skip
        puts = [Put(next_record(a1), la.token, effects=again)]
        assert store._pipelined([_Sent.of(put) for put in puts]) is not None
        assert store.get_effect(a.run_id, "kept") == kept
        assert store.get_effect(a.run_id, "redo") == again[1]
        assert store.get_effect(a.run_id, "fresh") == again[2]
        batch = [Put(next_record(b0), lb.token, effects=twice), Put(next_record(a0), la.token)]
        assert store._pipelined([_Sent.of(put) for put in batch]) is None
        with pytest.raises(NotFoundError):
            store.get_effect(b.run_id, "twice")  # the failed statement wrote nothing
        got = store.put_checkpoints(batch)
        assert isinstance(got[0], PutResult)
        assert store.get_effect(b.run_id, "twice") == twice[0]


# -- a lone put in one statement (WRITE_ONE) and the batch's array columns ---------------------
def test_a_lone_plain_put_is_one_statement_and_a_refused_one_says_why(url: str) -> None:
    """A plain put without a journal never opens the four-statement transaction; a stale
    token or a taken id fails the guarded statement, writes nothing, and the put then
    raises what it always raised. The cancel flag comes back from the one statement."""
    with PostgresStore.from_url(url) as store, PostgresStore.from_url(url) as other:
        [(run, first, lease)] = _started(store, 1)
        real_tx = store._tx
        store._tx = None  # type: ignore[assignment,method-assign]  # any use would raise
        second = next_record(first)
        assert store.put_checkpoint(second, lease_token=lease.token) == PutResult(False)
        other.request_cancel(run.run_id)
        third = next_record(second)
        assert store.put_checkpoint(third, lease_token=lease.token) == PutResult(True)
        assert store.get_run(run.run_id).head_checkpoint_id == third.checkpoint_id
        fourth = next_record(third)
        assert store.put_checkpoints([Put(fourth, lease.token)]) == [PutResult(True)]
        assert store.get_run(run.run_id).head_checkpoint_id == fourth.checkpoint_id
        third = fourth
        store._tx = real_tx  # type: ignore[method-assign]
        stale_batch = [Put(next_record(third), lease.token + 1)]
        assert isinstance(store.put_checkpoints(stale_batch)[0], LeaseLostError)
        with pytest.raises(ConflictError):
            store.put_checkpoint(third, lease_token=lease.token)
        store.acquire_lease(run.run_id, OTHER_OWNER, TTL, takeover_token=lease.token)
        stale = next_record(third)
        with pytest.raises(LeaseLostError):
            store.put_checkpoint(stale, lease_token=lease.token)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(stale.checkpoint_id)  # the failed statement wrote nothing
        assert store.get_run(run.run_id).head_checkpoint_id == third.checkpoint_id


@pytest.mark.parametrize(
    ("sql_type", "items"),
    [
        ("text", ["a", "", "é€𝄞", None, "x" * 5000]),
        ("text", []),
        ("bytea", [b"\x00\xff", b"", None, bytes(range(256))]),
        ("bigint", [0, -1, 2**63 - 1, -(2**63), None]),
        ("int", [0, 2**31 - 1, -(2**31), None]),
        ("bigint", [1, 2, 3]),
    ],
)
def test_batch_columns_reach_the_server_as_the_values_they_hold(
    url: str, sql_type: str, items: list[Any]
) -> None:
    with PostgresStore.from_url(url) as store, store._pool.connection() as conn:
        column = _arrays.COLUMNS[sql_type](items)
        [got] = conn.execute(f"SELECT %b::{sql_type}[]", [column]).fetchone() or [None]
        assert got == items


@pytest.mark.parametrize(
    ("sql_type", "items"),
    [("text", ["a\x00b"]), ("text", [1]), ("int", [2**31]), ("bigint", ["1"])],
)
def test_a_batch_column_it_cannot_write_is_a_statement_failure(
    url: str, sql_type: str, items: list[Any]
) -> None:
    """psycopg.DataError, which the batch takes as "write it one put at a time" (where
    psycopg's own dumpers refuse the value as they always did)."""
    with (
        PostgresStore.from_url(url) as store,
        store._pool.connection() as conn,
        pytest.raises(psycopg.DataError),
    ):
        conn.execute(f"SELECT %b::{sql_type}[]", [_arrays.COLUMNS[sql_type](items)])


@pytest.mark.parametrize(("query", "threshold"), [("", 5), ("&prepare_threshold=0", 0),
                                                  ("&prepare_threshold=none", None)])  # fmt: skip
def test_prepare_threshold_reaches_the_pools_connections_and_the_url(
    url: str, query: str, threshold: int | None
) -> None:
    """none: nothing is prepared on the server, for a pooler in transaction mode (PgBouncer
    before 1.21); the URL keeps it, so a store reopened from ``store.url`` prepares alike."""
    with PostgresStore.from_url(url + "&pool_max=1" + query) as store:
        assert parse_url(store.url)[1].get("prepare_threshold", 5) == threshold
        [(run, record, lease)] = _started(store, 1)
        for _ in range(7):  # past the default threshold: the put's statement is prepared
            record = next_record(record)
            store.put_checkpoint(record, lease_token=lease.token)
        assert store.latest_checkpoint(run.run_id) == record
        with store._pool.connection() as conn:  # the one connection every put used
            assert conn.prepare_threshold == threshold
            [prepared] = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert (prepared > 0) == (threshold is not None)

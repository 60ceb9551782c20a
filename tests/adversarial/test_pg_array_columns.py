"""Attacks on the PostgreSQL batch's array columns (stores/postgres/_arrays.py).

The batch statements' arrays are written in PostgreSQL's binary array format by hand,
not by psycopg: a wrong length word or header would corrupt checkpoints silently, or
make the server read one element's bytes as the next one's length. So each column
type is checked against the real server with random values: what ``_arrays`` sends
must be, on the server (array equality there compares the dimensions and lower
bounds too), the array psycopg's own adaptation of the same list makes, and read back
as the list it was. Then whole batches of hostile puts go through the store's group
commit (``put_checkpoints``, the one-statement path) and every row is read back.
"""

from __future__ import annotations

import array
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from savegame.model import EffectKind, EffectStatus, RunStatus, Usage
from savegame.stores._common import detached_effect
from savegame.stores.base import Put, PutResult
from savegame.testing.builders import OWNER, blob_digest, make_effect, make_record, make_run
from tests import services

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from savegame.stores.postgres import PostgresStore, _arrays  # noqa: E402
from savegame.stores.postgres._statements import WRITE_PLAIN  # noqa: E402
from savegame.stores.postgres._store import _COLUMN_TYPES  # noqa: E402

QUICK = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
INT4 = (-(2**31), 2**31 - 1)
INT8 = (-(2**63), 2**63 - 1)

# Any character UTF-8 can carry (no lone surrogate) but NUL, which no text column takes.
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24)


@st.composite
def _buffers(draw: st.DrawFn) -> Any:
    """A bytea value as a caller may hold it: bytes, bytearray or a memoryview, including
    a memoryview whose items are wider than a byte (len() counts items, not bytes)."""
    data = draw(st.binary(max_size=40))
    kind = draw(st.sampled_from(["bytes", "bytearray", "view", "wide view"]))
    if kind == "bytearray":
        return bytearray(data)
    if kind == "view":
        return memoryview(data)
    if kind == "wide view":
        return memoryview(array.array("i", data[: len(data) // 4 * 4]))
    return data


ELEMENTS: dict[str, st.SearchStrategy[Any]] = {
    "text": TEXT | st.just("") | st.just("𝄞" * 600),
    "bytea": _buffers(),
    "bigint": st.integers(*INT8) | st.sampled_from([0, -1, INT8[0], INT8[1]]),
    "int": st.integers(*INT4) | st.sampled_from([0, -1, INT4[0], INT4[1]]),
}


@pytest.fixture(scope="module")
def conn() -> Iterator[Any]:
    """A connection dumping the column classes, as the store's pool configures its own."""
    with psycopg.connect(services.postgres_conninfo(), autocommit=True) as conn:
        _arrays.register(conn)
        yield conn


def _expected(items: list[Any]) -> list[Any]:
    return [memoryview(v).tobytes() if isinstance(v, (bytearray, memoryview)) else v for v in items]


def _both(conn: Any, sql_type: str, items: list[Any]) -> tuple[Any, ...]:
    """The column as ``_arrays`` sends it and as psycopg's list adaptation does: on the
    server, whether they are the same array; back here, each, and ours element by element."""
    ours = _arrays.COLUMNS[sql_type](items)
    row = conn.execute(
        f"""SELECT %b::{sql_type}[] IS NOT DISTINCT FROM %s::{sql_type}[], %b::{sql_type}[],
            %s::{sql_type}[], ARRAY(SELECT x FROM unnest(%b::{sql_type}[]) WITH ORDINALITY
            AS u(x, i) ORDER BY i), array_lower(%b::{sql_type}[], 1)""",
        [ours, list(items), ours, list(items), ours, ours],
    ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize("sql_type", sorted(ELEMENTS))
def test_each_column_type_reaches_the_server_as_psycopg_would_send_it(
    conn: Any, sql_type: str
) -> None:
    @QUICK
    @given(st.lists(st.none() | ELEMENTS[sql_type], max_size=30))
    def check(items: list[Any]) -> None:
        same, ours, theirs, unnested, lower = _both(conn, sql_type, items)
        assert same is True
        assert ours == theirs == unnested == _expected(items)
        assert lower == (1 if items else None)

    check()


@pytest.mark.parametrize("sql_type", sorted(ELEMENTS))
def test_empty_and_all_null_columns(conn: Any, sql_type: str) -> None:
    for items in ([], [None], [None] * 5):
        same, ours, theirs, unnested, _lower = _both(conn, sql_type, items)
        assert (same, ours, theirs, unnested) == (True, items, items, items)


def test_large_elements_and_long_columns(conn: Any) -> None:
    big_text, big_bytes = "é𝄞x" * 40_000, bytes(range(256)) * 1024  # 280 KB, 256 KiB
    for sql_type, items in [
        ("text", [big_text, None, "", big_text[:-1]]),
        ("bytea", [big_bytes, b"", None, big_bytes[1:]]),
        ("text", [str(i) for i in range(5000)]),
        ("bigint", list(range(-2500, 2500))),
        ("int", [None if i % 7 == 0 else i for i in range(5000)]),
    ]:
        same, ours, theirs, _unnested, _lower = _both(conn, sql_type, items)
        assert same is True
        assert ours == theirs == items


def test_a_wide_memoryview_is_sent_as_its_bytes(conn: Any) -> None:
    """len() of a memoryview of int32s counts 4-byte items: as the length word it made the
    server read part of the value as the next element's length, and refuse the parameter
    ("insufficient data left in message"; failed so before _bytea sent its bytes)."""
    wide = memoryview(array.array("i", [1, 2]))
    same, ours, theirs, _unnested, _lower = _both(conn, "bytea", [wide, b"x", None])
    assert same is True
    assert ours == theirs == [wide.tobytes(), b"x", None]


@pytest.mark.parametrize(
    ("encoding", "alphabet"),
    [("UTF8", "utf-8"), ("SQL_ASCII", "utf-8"), ("LATIN1", "latin-1")],
)
def test_text_in_the_client_encoding_psycopg_uses(conn: Any, encoding: str, alphabet: str) -> None:
    """psycopg sends str as UTF-8 under SQL_ASCII (whose codec is "ascii"), else in the
    client encoding; so must the columns (under SQL_ASCII they refused anything but
    ASCII, and every batch with an accent went the slow way: fixed, tested here)."""
    chars = st.characters(codec=alphabet, exclude_characters="\x00")
    conn.execute(f"SET client_encoding TO {encoding}")
    try:

        @QUICK
        @given(st.lists(st.none() | st.text(chars, max_size=12), max_size=12))
        def check(items: list[str | None]) -> None:
            same, ours, theirs, unnested, _lower = _both(conn, "text", items)
            assert same is True
            assert ours == theirs == unnested
            if encoding != "SQL_ASCII":  # there psycopg reads text back as bytes
                assert ours == items

        check()
        same, *_ = _both(conn, "text", ["é€𝄞" if encoding in ("UTF8", "SQL_ASCII") else "é"])
        assert same is True
    finally:
        conn.execute("RESET client_encoding")


BAD: dict[str, st.SearchStrategy[Any]] = {
    "text": st.sampled_from(["a\x00b", "\x00", "\ud800", "x\udcff", b"bytes", 1, 1.5]),
    "bytea": st.sampled_from(["text", 1, 2.5, object()]),
    "bigint": st.sampled_from([INT8[1] + 1, INT8[0] - 1, 1.0, "1", b"1"]),
    "int": st.sampled_from([INT4[1] + 1, INT4[0] - 1, INT8[1], 0.5, "1"]),
}


@pytest.mark.parametrize("sql_type", sorted(BAD))
def test_a_value_the_columns_cannot_write_is_a_data_error_and_nothing_is_sent(
    conn: Any, sql_type: str
) -> None:
    """Whatever the column holds beside it, a value it cannot write is psycopg.DataError
    (the batch's cue to write put by put) before anything reaches the server: the
    connection is idle and usable after."""

    @QUICK
    @given(
        st.lists(st.none() | ELEMENTS[sql_type], max_size=8),
        BAD[sql_type],
        st.integers(0, 8),
    )
    def check(good: list[Any], bad: Any, at: int) -> None:
        items = [*good[:at], bad, *good[at:]]
        with pytest.raises(psycopg.DataError):
            conn.execute(f"SELECT %b::{sql_type}[]", [_arrays.COLUMNS[sql_type](items)])
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT 1").fetchone() == (1,)

    check()


def test_every_write_plain_parameter_is_a_column_of_its_cast() -> None:
    """The statement's array parameters, read from its casts, are the columns the store
    builds (28, and 15 more with a journal): one too few or many would shift them all."""
    for (journal, _guarded), sql in WRITE_PLAIN.items():
        assert len(_COLUMN_TYPES[sql]) == sql.count("%b") == (43 if journal else 28)


# -- whole batches through the store's group commit --------------------------------------
@pytest.fixture(scope="module")
def store() -> Iterator[PostgresStore]:
    with services.postgres_schema("sgarrays") as schema:
        store = PostgresStore.from_url(services.postgres_url(schema))
        try:
            yield store
        finally:
            store.close()


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(*INT8)
    | st.floats(allow_nan=False, allow_infinity=False)
    # NUL is fine here: the JSON text escapes it (\u0000) and the columns are json.
    | st.text(st.characters(codec="utf-8"), max_size=16)
)
METADATA = st.dictionaries(
    st.text(st.characters(codec="utf-8"), max_size=8),
    st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6),
    max_size=4,
)
MAYBE_TEXT = st.none() | st.just("") | TEXT
WHEN = st.datetimes(
    min_value=datetime(1, 1, 2),  # hypothesis takes naive bounds
    max_value=datetime(9999, 12, 30),
    timezones=st.just(UTC),
)


def _id(draw: st.DrawFn, what: str) -> str:
    """Unique, with a hostile tail: any UTF-8 text but NUL, or 500 four-byte characters
    (2 KB: long, yet under the 2.7 KB a btree index row may take)."""
    tail = draw(TEXT | st.just("𝄞" * 500))
    return f"{what}-{uuid.uuid4().hex}-{tail}"


@st.composite
def _batches(draw: st.DrawFn) -> dict[str, Any]:
    puts = []
    for _ in range(draw(st.integers(2, 5))):  # one plain put alone is WRITE_ONE, no arrays
        effects = [
            {
                "request_id": _id(draw, "req"),
                "name": draw(TEXT),
                "node": draw(TEXT),
                "step": draw(st.integers(*INT8)),
                "call_index": draw(st.integers(*INT8)),
                "arguments": draw(st.binary(max_size=64)),
                "result": draw(st.none() | st.binary(max_size=64)),
                "error": draw(MAYBE_TEXT),
                "metadata": draw(METADATA),
                "created_at": draw(WHEN),
                "completed_at": draw(st.none() | WHEN),
                "checksum": draw(TEXT),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        puts.append(
            {
                "thread_id": _id(draw, "thread"),
                "checkpoint_id": _id(draw, "cp"),
                "step": draw(st.integers(0, INT8[1])),
                "node": draw(MAYBE_TEXT),
                "status": draw(st.sampled_from([RunStatus.RUNNING, RunStatus.COMPLETED])),
                "next": draw(MAYBE_TEXT),
                "metadata": draw(METADATA),
                "created_at": draw(WHEN),
                "expires_at": draw(st.none() | WHEN),
                "state_version": draw(st.integers(*INT4)),
                "base_id": draw(st.none() | TEXT),
                "state": {"s": draw(TEXT), "m": draw(METADATA)},
                "usage": Usage(
                    input_tokens=draw(st.integers(0, 2**40)),
                    cost_usd=draw(st.floats(0, 1e6)),
                ),
                "error": draw(MAYBE_TEXT),
                "effects": effects,
            }
        )
    return {"puts": puts, "blob_put": draw(st.booleans())}


def _start(store: PostgresStore, thread_id: str) -> tuple[Any, Any]:
    run, first = make_run(thread_id)
    return first, store.create_run(run, first, owner=OWNER, ttl=60.0)


def _worst(n: int) -> dict[str, Any]:
    """Every edge at once, for the example hypothesis need not find: long ids, NULs in
    metadata, empty strings beside NULLs, empty bytes, the integer columns' extremes."""
    long = "𝄞" * 500
    meta = {"nul": "a\x00b", "": ["\x00", "𝄞", -0.0, INT8[0]], "𝄞": {"k": None}}
    when = datetime(1, 1, 2, tzinfo=UTC)
    effect = {
        "name": "", "node": "", "step": INT8[1], "call_index": INT8[0], "arguments": b"",
        "result": b"", "error": "", "metadata": meta, "created_at": when,
        "completed_at": datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC), "checksum": "",
    }  # fmt: skip
    puts = [
        {
            "thread_id": f"thread-{uuid.uuid4().hex}-{long}",
            "checkpoint_id": f"cp-{uuid.uuid4().hex}-{long}",
            "step": INT8[1] if i % 2 else 0,
            "node": ["", None][i % 2],
            "status": RunStatus.RUNNING,
            "next": [None, ""][i % 2],
            "metadata": meta,
            "created_at": when,
            "expires_at": None if i % 2 else when,
            "state_version": INT4[i % 2],
            "base_id": ["", None][i % 2],
            "state": {"s": "\x00𝄞", "m": meta},
            "usage": Usage(),
            "error": ["", None][i % 2],
            "effects": [{**effect, "request_id": f"req-{uuid.uuid4().hex}-{long}"}] * (i % 2),
        }
        for i in range(n)
    ]
    return {"puts": puts, "blob_put": n > 2}


@given(_batches())
@example(_worst(2))
@example(_worst(3))
@QUICK
def test_hostile_batches_read_back_as_they_were_put(
    store: PostgresStore, batch: dict[str, Any]
) -> None:
    """Every put of the batch goes through the one-statement write (no put-by-put
    fallback: _pipelined answers), beside a put with a blob (the pipeline) or not
    (autocommit); then every checkpoint, head and journal entry reads back as put."""
    puts, effects = [], []
    for spec in batch["puts"]:
        first, lease = _start(store, spec["thread_id"])
        record = make_record(
            spec["thread_id"],
            first.run_id,
            checkpoint_id=spec["checkpoint_id"],
            parent_id=first.checkpoint_id,
            step=spec["step"],
            node=spec["node"],
            status=spec["status"],
            next=spec["next"],
            usage=spec["usage"],
            metadata=spec["metadata"],
            created_at=spec["created_at"],
            expires_at=spec["expires_at"],
            state_version=spec["state_version"],
            state=spec["state"],
            base_id=spec["base_id"],
        )
        journal = [
            make_effect(
                first.run_id,
                kind=EffectKind.WRITE,
                status=EffectStatus.DONE if e["result"] is not None else EffectStatus.PENDING,
                **e,
            )
            for e in spec["effects"]
        ]
        effects += journal
        puts.append(Put(record, lease.token, spec["error"], journal))
    if batch["blob_put"]:
        first, lease = _start(store, f"thread-{uuid.uuid4().hex}")
        data = "𝄞\x00".encode() * 10
        digest = blob_digest(data)
        record = make_record(
            first.header.thread_id,
            first.run_id,
            parent_id=first.checkpoint_id,
            step=1,
            metadata={"nul": "\x00"},
            blobs=(digest,),
        )
        puts.append(Put(record, lease.token, blobs={digest: data}))

    answers: list[Any] = []
    pipelined = store._pipelined

    def spy(sent: Any) -> Any:
        answers.append(pipelined(sent))
        return answers[-1]

    store._pipelined = spy  # type: ignore[method-assign]
    try:
        results = store.put_checkpoints(puts)
    finally:
        del store._pipelined
    assert results == [PutResult(False)] * len(puts)
    assert len(answers) == 1
    assert answers[0] is not None, "the batch fell back to put-by-put writes"
    for put in puts:
        record = put.record
        assert store.get_checkpoint(record.checkpoint_id) == record
        run = store.get_run(record.run_id)
        assert (run.head_checkpoint_id, run.step, run.status, run.error) == (
            record.checkpoint_id,
            record.header.step,
            record.header.status,
            put.error,
        )
    for effect in effects:
        assert store.get_effect(effect.run_id, effect.request_id) == detached_effect(effect)


@pytest.mark.parametrize("beside", ["plain", "blob"])
@pytest.mark.parametrize("field", ["error", "node", "thread_id", "effect error"])
def test_a_nul_in_a_batch_refuses_its_put_alone(
    store: PostgresStore, field: str, beside: str
) -> None:
    """A NUL in a text column: the batch's statement is refused before it is sent, and
    the put-by-put writes refuse that put alone (psycopg.DataError, naming the NUL,
    rolled back to its savepoint), in autocommit (plain puts only) or in the pipeline
    (beside a put with a blob). The other put lands: one run's bad value must not fail
    every run batched with it. The refused run writes its next checkpoint as usual."""
    nul = "bad\x00value"
    tid = nul if field == "thread_id" else f"thread-{uuid.uuid4().hex}"
    first, lease = _start(store, f"thread-{uuid.uuid4().hex}")
    journal = [make_effect(first.run_id, error=nul)] if field == "effect error" else []
    hostile = make_record(
        tid,
        first.run_id,
        parent_id=first.checkpoint_id,
        step=1,
        node=nul if field == "node" else "work",
    )
    puts = [Put(hostile, lease.token, nul if field == "error" else None, journal)]
    other, other_lease = _start(store, f"thread-{uuid.uuid4().hex}")
    data = b"blob"
    blobs = (blob_digest(data),) if beside == "blob" else ()
    fine = make_record(
        other.header.thread_id, other.run_id, parent_id=other.checkpoint_id, step=1, blobs=blobs
    )
    puts.append(Put(fine, other_lease.token, blobs=dict.fromkeys(blobs, data)))

    refused, written = store.put_checkpoints(puts)
    assert isinstance(refused, psycopg.DataError) and "NUL" in str(refused)
    assert written == PutResult(False)
    assert store.get_run(first.run_id).head_checkpoint_id == first.checkpoint_id
    assert store.list_checkpoints(first.run_id) == [first.header]
    assert store.list_effects(first.run_id) == []
    assert store.get_run(other.run_id).head_checkpoint_id == fine.checkpoint_id
    again = make_record(first.header.thread_id, first.run_id, step=1)
    assert store.put_checkpoints([Put(again, lease.token)]) == [PutResult(False)]
    assert store.get_run(first.run_id).head_checkpoint_id == again.checkpoint_id


def test_a_batch_at_the_edges_of_its_integer_columns(store: PostgresStore) -> None:
    """step and the times are bigint, state_version int: their extremes are written by
    the batch as they are; one past an int column's range sends the batch put by put,
    where the server refuses that put alone."""
    first, lease = _start(store, f"thread-{uuid.uuid4().hex}")
    edge = make_record(
        first.header.thread_id,
        first.run_id,
        parent_id=first.checkpoint_id,
        step=INT8[1],
        state_version=INT4[0],
    )
    second, lease2 = _start(store, f"thread-{uuid.uuid4().hex}")
    low = make_record(second.header.thread_id, second.run_id, step=0, state_version=INT4[1])
    assert (
        store.put_checkpoints([Put(edge, lease.token), Put(low, lease2.token)])
        == [PutResult(False)] * 2
    )
    assert store.get_checkpoint(edge.checkpoint_id) == edge
    assert store.get_checkpoint(low.checkpoint_id) == low
    assert store.get_run(first.run_id).step == INT8[1]

    third, lease3 = _start(store, f"thread-{uuid.uuid4().hex}")
    past = make_record(third.header.thread_id, third.run_id, step=1, state_version=INT4[1] + 1)
    fourth, lease4 = _start(store, f"thread-{uuid.uuid4().hex}")
    fine = make_record(fourth.header.thread_id, fourth.run_id, step=1)
    refused, written = store.put_checkpoints([Put(past, lease3.token), Put(fine, lease4.token)])
    assert isinstance(refused, psycopg.errors.NumericValueOutOfRange)
    assert written == PutResult(False)
    assert store.get_run(third.run_id).head_checkpoint_id == third.checkpoint_id
    assert store.get_run(fourth.run_id).head_checkpoint_id == fine.checkpoint_id

"""Any column of any row, changed: savegame refuses and names the record, or ends exactly
as if nothing happened, and never pays twice.

A run is taken to the point where it waits for a person, after a read, a paid
write, blobs, packs and deltas. Hypothesis then picks a table, a row, a column and
a change, applies it to a copy of the SQLite file with sqlite3, and checks
``verify``, a load and the resume that finishes the run.

One column is left out on purpose: ``runs.cancel_requested`` is a request anyone may
make without a key (``savegame cancel``), so setting it is not an attack.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from savegame import (
    END,
    SavegameError,
    StepContext,
    StorageConfig,
    Workflow,
    codec,
    get_checkpoint,
    resume,
    run,
    tool,
    verify,
)
from savegame.codec.crypto import Keyring
from savegame.model import RunStatus
from savegame.stores import open_store

RUN = "run-7f3a"
BASE = StorageConfig(keyframe_every=3, blob_threshold=100, pack_bytes=512, compress_threshold=64)
MODES = {
    "plain": BASE,
    "keys": StorageConfig(
        keyframe_every=3, blob_threshold=100, pack_bytes=512, compress_threshold=64,
        keyring=Keyring({"k1": os.urandom(32)}, active="k1"),
        sensitive_metadata=frozenset({"customer"}),
    ),
}  # fmt: skip
TABLES = ("runs", "checkpoints", "effects", "blobs", "checkpoint_blobs")
SKIPPED = {("runs", "cancel_requested")}
charges: list[str] = []


@tool(effect="read")
def lookup(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "total": 120, "note": "a long note about the order " * 8}


@tool(effect="write")
def charge(order_id: str, amount: int) -> dict[str, Any]:
    charges.append(order_id)
    return {"receipt": f"R-{order_id}", "amount": amount}


def flow() -> Workflow:
    wf = Workflow("edited")

    @wf.step(entry=True)
    def gather(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        order = ctx.call(lookup, "A-1")
        ctx.tag(customer="ada@example.com", stage="gather")
        return {"order": order, "log": [*state["log"], {"event": "looked up"}]}, "pay"

    @wf.step()
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        receipt = ctx.call(charge, state["order"]["id"], state["order"]["total"])
        ctx.add_usage(input_tokens=10, output_tokens=5, cost_usd=0.25, llm_calls=1)
        doc = "the signed contract, clause after clause " * 10
        return {
            "receipt": receipt,
            "doc": doc,
            "log": [*state["log"], {"paid": receipt}],
        }, "confirm"

    @wf.step()
    def confirm(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        answer = ctx.interrupt({"confirm": state["receipt"]["receipt"]})
        return {"confirmed": answer, "log": [*state["log"], {"confirmed": answer}]}, END

    return wf


INPUT = {"log": [{"n": n, "text": f"earlier message {n} " * 6} for n in range(30)]}


class Prepared:
    """A store file with the run waiting for its confirmation, and the result it must reach."""

    def __init__(self, root: Path, storage: StorageConfig) -> None:
        self.storage = storage
        reference = root / "reference.db"
        run(flow(), INPUT, run_id=RUN, store=f"sqlite:///{reference}", storage=storage)
        done = resume(
            RUN, value=True, store=f"sqlite:///{reference}", workflow=flow(), storage=storage
        )
        assert done.status is RunStatus.COMPLETED
        self.expected = codec.canonical(done.state)
        self.path = root / "waiting.db"
        url = f"sqlite:///{self.path}"
        charges.clear()
        assert (
            run(flow(), INPUT, run_id=RUN, store=url, storage=storage).status
            is RunStatus.INTERRUPTED
        )
        assert charges == ["A-1"]
        self.waiting = codec.canonical(get_checkpoint(RUN, store=url, storage=storage).state)
        with open_store(url) as store:
            self.ids = {RUN, *(h.checkpoint_id for h in store.list_checkpoints(RUN))}
            self.ids |= {e.request_id for e in store.list_effects(RUN)}
            self.ids |= {d for h in store.list_checkpoints(RUN) for d in h.blobs}
        # One file (no WAL beside it), so a copy is the whole store.
        conn = sqlite3.connect(self.path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def copy(self, target: Path) -> Path:
        shutil.copyfile(self.path, target)
        return target


@pytest.fixture(scope="module", params=sorted(MODES))
def prepared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prepared]:
    yield Prepared(tmp_path_factory.mktemp(request.param), MODES[request.param])


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    key = "checkpoint_id, digest" if table == "checkpoint_blobs" else "rowid"
    cursor = conn.execute(f"SELECT {key}, * FROM {table}")
    width = 2 if table == "checkpoint_blobs" else 1
    columns = [d[0] for d in cursor.description][width:]
    return columns, cursor.fetchall()


def _changed(draw: st.DrawFn, value: Any) -> Any:
    if value is None:
        return draw(st.sampled_from([0, "x", b"\x00", 1.5]))
    if isinstance(value, int):
        return draw(st.sampled_from([value + 1, value - 1, 0, -value, 2**40, "text", None]))
    if isinstance(value, float):
        return draw(st.sampled_from([value + 1.5, 0.0, -value, None]))
    if isinstance(value, str):
        if not value:
            return draw(st.sampled_from(["x", None]))
        i = draw(st.integers(0, len(value) - 1))
        flipped = value[:i] + ("0" if value[i] != "0" else "1") + value[i + 1 :]
        return draw(st.sampled_from([flipped, value[:-1], value + "x", "", "garbage", None]))
    data = bytes(value)
    if not data:
        return draw(st.sampled_from([b"\x00", None]))
    i = draw(st.integers(0, len(data) - 1))
    bit = draw(st.integers(0, 7))
    flipped = data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
    return draw(st.sampled_from([flipped, data[:-1], data + b"\x00", b"", None]))


@st.composite
def edits(draw: st.DrawFn, path: Path) -> tuple[str, str, Any, Any]:
    table = draw(st.sampled_from(TABLES))
    conn = sqlite3.connect(path)
    try:
        columns, rows = _rows(conn, table)
    finally:
        conn.close()
    assume(rows)
    row = draw(st.sampled_from(rows))
    width = 2 if table == "checkpoint_blobs" else 1
    column = draw(st.sampled_from([c for c in columns if (table, c) not in SKIPPED]))
    old = row[width + columns.index(column)]
    new = _changed(draw, old)
    assume(new != old)
    return table, column, row[:width], new


def _apply(path: Path, table: str, column: str, key: tuple[Any, ...], value: Any) -> None:
    where = "checkpoint_id = ? AND digest = ?" if table == "checkpoint_blobs" else "rowid = ?"
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value, *key))
        conn.commit()
    except sqlite3.IntegrityError:
        assume(False)  # NOT NULL, a duplicate key: the database itself refuses the edit
    finally:
        conn.close()


def _refused_naming_a_record(exc: SavegameError, ids: set[str]) -> None:
    message = str(exc)
    assert any(ident in message for ident in ids), (
        f"{type(exc).__name__} names no record: {message}"
    )


@settings(
    max_examples=int(os.environ.get("SAVEGAME_ATTACK_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_an_edited_column_is_refused_or_changes_nothing(
    prepared: Prepared, tmp_path: Path, data: st.DataObject
) -> None:
    path = prepared.copy(tmp_path / f"attacked-{os.urandom(4).hex()}.db")
    table, column, key, value = data.draw(edits(path), label="edit")
    _apply(path, table, column, key, value)
    url, storage = f"sqlite:///{path}", prepared.storage
    # An edited id column names the record by its new id.
    ids = prepared.ids | {
        value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    }
    charges.clear()
    # verify: it reports (each damage by kind and id) or refuses, naming the record.
    try:
        report = verify(store=url, storage=storage)
        assert all(d.kind in ("run", "checkpoint", "blob", "effect") for d in report.damaged)
    except SavegameError as exc:
        _refused_naming_a_record(exc, ids)
    # A load: the state as it was, or a refusal.
    try:
        loaded = get_checkpoint(RUN, store=url, storage=storage)
        assert codec.canonical(loaded.state) == prepared.waiting
    except SavegameError as exc:
        _refused_naming_a_record(exc, ids)
    # The resume that finishes the run: exactly the uninterrupted result, or a refusal.
    try:
        done = resume(RUN, value=True, store=url, workflow=flow(), storage=storage)
    except SavegameError as exc:
        _refused_naming_a_record(exc, ids)
    else:
        assert done.status is RunStatus.COMPLETED
        assert codec.canonical(done.state) == prepared.expected
    assert charges == []  # never paid twice, whatever was edited

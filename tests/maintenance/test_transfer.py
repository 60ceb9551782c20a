"""export_run / import_run: a run, or a thread, moved to a fresh store of every backend
round-trips exactly: rows (their checks included), checkpoints, journal, blobs, lineage."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, StepContext, StorageConfig, Workflow, tool
from savegame.codec.crypto import Keyring
from savegame.model import RunStatus
from savegame.stores import SqliteStore
from savegame.stores.base import ALL_EFFECTS, Store
from tests.services import BACKENDS, S3Server, scratch_store

RING = Keyring({"xfer": os.urandom(32)}, active="xfer")
PLAIN = StorageConfig(keyframe_every=3, blob_threshold=100, pack_bytes=512)
SEALED = replace(PLAIN, keyring=RING, sensitive_metadata=frozenset({"customer"}))
DECLINE = {"on": True}
"""The card is declined until a test says otherwise (the failed run then resumes)."""


@tool(effect="write", idempotent=True)
def xfer_charge(amount: int, *, request_id: str) -> dict[str, Any]:
    return {"charged": amount, "by": request_id}


@tool(effect="read")
def xfer_lookup(n: int) -> str:
    return f"row {n} " + "lorem " * 40


def shop() -> Workflow:
    wf = Workflow("xfer-shop")

    @wf.step(entry=True)
    def work(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        found = ctx.call(xfer_lookup, n)
        receipt = ctx.call(xfer_charge, n * 10) if n % 2 else None
        log = [*state.get("log", []), {"n": n, "found": found, "receipt": receipt}]
        if state.get("fail_at") == n and DECLINE["on"]:
            raise RuntimeError("the card was declined")
        return {"n": n, "log": log, "big": "x" * 300 + str(n)}, ("work" if n < 5 else END)

    return wf


def stock(store: Store, storage: StorageConfig) -> None:
    """Thread t: two runs (the second continues from the first's head); a failed run."""
    wf = shop()
    meta = {"customer": "ada", "ticket": 7}
    savegame.run(wf, {}, store=store, run_id="t-1", thread_id="t", storage=storage, metadata=meta)
    savegame.run(wf, {"n": 1}, store=store, run_id="t-2", thread_id="t", storage=storage)
    with pytest.raises(savegame.errors.StepError):
        savegame.run(wf, {"fail_at": 2}, store=store, run_id="f-1", storage=storage)


def dump(store: Store, run_ids: list[str]) -> list[Any]:
    """Everything a store holds of these runs, as the store hands it out."""
    out: list[Any] = []
    for run_id in run_ids:
        # The lease and updated_at belong to the store the run is in, not to the run.
        out.append(replace(store.get_run(run_id), lease=None, updated_at=None))
        headers = store.list_checkpoints(run_id)
        out.append(headers)
        out.append([store.get_checkpoint(h.checkpoint_id) for h in headers])
        out.append(store.list_effects(run_id, limit=ALL_EFFECTS))
        out.append(store.get_blobs(sorted({d for h in headers for d in h.blobs})))
    return out


@contextmanager
def _objects(s3: S3Server, tmp_path: Path) -> Iterator[Store]:
    from savegame.stores.objects import ObjectStorageStore

    client = s3.client()
    store = ObjectStorageStore(
        SqliteStore(tmp_path / "meta.db"),
        s3.bucket,
        prefix=uuid.uuid4().hex,
        threshold=16,
        client=client,
    )
    try:
        yield store
    finally:
        store.close()
        client.close()


@pytest.fixture(params=[*sorted(BACKENDS), "objects"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend (objects: SQLite rows, bodies in a bucket)."""
    if request.param == "objects":
        with _objects(request.getfixturevalue("s3_server"), tmp_path) as store:
            yield store
        return
    with scratch_store(request.param, tmp_path) as store:
        yield store


@pytest.mark.parametrize("storage", [PLAIN, SEALED], ids=["plain", "encrypted"])
def test_a_thread_and_a_run_round_trip_exactly(
    target: Store, tmp_path: Path, storage: StorageConfig
) -> None:
    source = SqliteStore(tmp_path / "source.db")
    stock(source, storage)
    thread_file, run_file = tmp_path / "t.sgx", tmp_path / "f.sgx"
    # Export needs no key: the records leave as stored.
    thread = savegame.client.export_run("t", thread_file, store=source)
    failed = savegame.client.export_run("f-1", run_file, store=source)
    assert thread.run_ids == ("t-1", "t-2") and failed.run_ids == ("f-1",)
    assert thread.effects > 0 and thread.blobs > 0 and thread.bytes == thread_file.stat().st_size

    loaded = savegame.client.import_run(thread_file, store=target, storage=storage)
    assert loaded == thread
    savegame.client.import_run(run_file, store=target, storage=storage)

    ids = ["t-1", "t-2", "f-1"]
    assert dump(target, ids) == dump(source, ids)
    report = savegame.client.verify(store=target, storage=storage)
    assert report.ok and report.runs == 3, report.damaged
    assert target.get_run("f-1").status is RunStatus.FAILED
    # Lineage: the second run's first checkpoint follows the first run's head.
    first_of_t2 = target.list_checkpoints("t-2")[-1]
    assert first_of_t2.parent_id == target.get_run("t-1").head_checkpoint_id
    for run_id in ids:
        here = savegame.client.get_checkpoint(run_id, store=target, storage=storage)
        there = savegame.client.get_checkpoint(run_id, store=source, storage=storage)
        assert here.state == there.state and here.header == there.header
    # The run moved is a run like any other: an imported failed run resumes and ends.
    DECLINE["on"] = False
    try:
        res = savegame.resume("f-1", store=target, storage=storage, workflow=shop())
    finally:
        DECLINE["on"] = True
    assert res.status is RunStatus.COMPLETED and res.state["n"] == 5
    source.close()


def test_an_import_refuses_a_run_that_exists_and_writes_nothing(
    target: Store, tmp_path: Path
) -> None:
    source = SqliteStore(tmp_path / "source.db")
    stock(source, PLAIN)
    path = tmp_path / "t.sgx"
    savegame.client.export_run("t", path, store=source)
    savegame.run(shop(), {}, store=target, run_id="t-2", thread_id="other", storage=PLAIN)
    with pytest.raises(savegame.errors.RunExistsError, match="t-2"):
        savegame.client.import_run(path, store=target, storage=PLAIN)
    assert [r.run_id for r in target.list_runs()] == ["t-2"]
    source.close()


def test_export_of_an_unknown_id_writes_no_file(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    with pytest.raises(savegame.errors.NotFoundError, match="nope"):
        savegame.client.export_run("nope", tmp_path / "x.sgx", store=store)
    assert list(tmp_path.glob("x.sgx*")) == [] and list(tmp_path.glob(".x.sgx*")) == []
    store.close()


def test_a_waiting_run_moves_still_waiting_and_is_woken_there(tmp_path: Path) -> None:
    from tests.runtime.test_events import PAYMENT

    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    waiting = savegame.run(PAYMENT, {}, store=source, run_id="w-1")
    savegame.send("w-1", "paid", 7, store=source)  # woken, not yet resumed
    savegame.resume("w-1", store=source)  # now waits for "shipped"
    savegame.send("w-1", "shipped", "early", store=source)  # kept for it
    path = tmp_path / "w.sgx"
    savegame.client.export_run("w-1", path, store=source)
    savegame.client.import_run(path, store=target)
    moved = savegame.client.get_run("w-1", store=target)
    assert moved.status is savegame.RunStatus.WAITING and waiting.status is moved.status
    assert moved.wake_at is not None  # its event came with it: woken there at once
    done = savegame.resume("w-1", store=target)
    assert done.state == {"paid": 7, "shipped": "early"}


def test_a_thread_imported_as_another_loads_the_same_beside_its_original(
    target: Store, tmp_path: Path
) -> None:
    """``thread=``: the runs land in a new thread, on every backend, their records resealed
    for it (sensitive metadata stays sealed), beside the thread they came from."""
    source = SqliteStore(tmp_path / "source.db")
    stock(source, SEALED)
    path = tmp_path / "t.sgx"
    savegame.client.export_run("t", path, store=source)
    # The store has a thread t of its own: the file's runs cannot join it.
    savegame.run(shop(), {}, store=target, run_id="mine", thread_id="t", storage=SEALED)
    with pytest.raises(
        savegame.errors.ThreadExistsError, match=r"thread t is in the store .*run mine"
    ):
        savegame.client.import_run(path, store=target, storage=SEALED)
    savegame.client.import_run(path, store=target, storage=SEALED, thread="t-copy")
    assert savegame.client.verify(store=target, storage=SEALED).ok
    for run_id in ("t-1", "t-2"):
        here = savegame.client.get_checkpoint(run_id, store=target, storage=SEALED)
        there = savegame.client.get_checkpoint(run_id, store=source, storage=SEALED)
        assert here.state == there.state
        assert here.header == replace(there.header, thread_id="t-copy", size=here.header.size)
        assert target.get_run(run_id).metadata == source.get_run(run_id).metadata  # sealed
    assert {r.run_id for r in target.list_runs(thread_id="t")} == {"mine"}
    source.close()


class _Renewing(SqliteStore):
    """Counts the import's lease renewals."""

    renewals = 0

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Any:
        type(self).renewals += 1
        return super().renew_lease(run_id, token, ttl)


def test_an_import_renews_its_lease_as_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How an import on another host shows it is alive (docs/export.md): a second import
    takes a lease that has not been renewed for two minutes for a dead import's."""
    from savegame.maintenance import _transfer

    source = SqliteStore(tmp_path / "source.db")
    stock(source, PLAIN)
    savegame.client.export_run("t", tmp_path / "t.sgx", store=source)
    monkeypatch.setattr(_transfer, "RENEW_EVERY", 0.0)
    target = _Renewing(tmp_path / "target.db")
    report = savegame.client.import_run(tmp_path / "t.sgx", store=target, storage=PLAIN)
    # Before every write after the run's creation, and once more before each row's checks.
    assert _Renewing.renewals >= report.checkpoints - len(report.run_ids) + report.effects
    target.close()
    source.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("storage", [PLAIN, SEALED], ids=["plain", "encrypted"])
def test_a_fork_exported_alone_brings_its_workspace_files(
    backend: str, storage: StorageConfig, tmp_path: Path
) -> None:
    """The fork's first record names the files of the checkpoint it forked (stored by its
    origin run, which stays behind): the file carries them, the import restores them."""
    from tests.runtime.test_fork_workspace import adding

    ws = tmp_path / "ws"
    ws.mkdir()
    wf = adding(ws)
    source = SqliteStore(tmp_path / "source.db")
    done = savegame.run(wf, {}, store=source, storage=storage)
    [at1] = [h for h in savegame.client.history(done.run_id, store=source) if h.step == 1]
    forked = savegame.client.fork(
        at1.checkpoint_id, store=source, workflow=wf, run=False, storage=storage
    )
    path = tmp_path / "fork.sgx"
    sent = savegame.client.export_run(forked.run_id, path, store=source)
    assert sent.run_ids == (forked.run_id,) and sent.blobs == 1
    with scratch_store(backend, tmp_path) as target:
        savegame.client.import_run(path, store=target, storage=storage)
        assert savegame.client.verify(store=target, storage=storage).ok
        first = savegame.client.get_checkpoint(forked.checkpoint_id, store=target, storage=storage)
        elsewhere = tmp_path / "elsewhere"
        savegame.client.restore_workspace(first, elsewhere, store=target, storage=storage)
        assert {p.name: p.read_text() for p in elsewhere.iterdir()} == {"f1.txt": "file 1 " * 40}
        ended = savegame.resume(forked.run_id, store=target, workflow=wf, storage=storage)
        assert ended.status is RunStatus.COMPLETED and ended.state["n"] == 3
    source.close()

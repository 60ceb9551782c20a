"""rekey re-encrypts a whole store, reseals metadata, renames blobs, and every state still loads."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from savegame import END, StepContext, Workflow, codec, resume, run
from savegame.client import (
    fire_schedules,
    get_checkpoint,
    get_run,
    get_schedule,
    history,
    list_runs,
    restore_workspace,
    schedule,
)
from savegame.codec import _blobs
from savegame.codec.crypto import Keyring, new_key
from savegame.codec.storage import StorageConfig
from savegame.errors import ConfigurationError, UnencryptedRecordError
from savegame.maintenance._integrity import verify
from savegame.maintenance._reencrypt import rekey
from savegame.stores import SqliteStore
from savegame.stores.schedules import schedules_of
from tests.maintenance.stocked import PLAIN, chatty, legacy_fork
from tests.runtime.test_schedules import DAILY


def test_rekey_encrypts_a_plain_store_and_rotates_keys(db: SqliteStore) -> None:
    result = run(chatty(), store=db, storage=PLAIN)
    expected = codec.canonical(get_checkpoint(result.run_id, store=db, storage=PLAIN).state)
    first = Keyring.parse(f"k1:{new_key()}")
    encrypted = replace(PLAIN, keyring=first)
    with pytest.raises(UnencryptedRecordError):
        get_checkpoint(result.run_id, store=db, storage=encrypted)
    report = rekey(db, storage=encrypted, adopt=True)
    assert report.checkpoints == 9 and report.key_id == "k1"
    assert (
        codec.canonical(get_checkpoint(result.run_id, store=db, storage=encrypted).state)
        == expected
    )
    assert verify(db, storage=encrypted).ok
    # Rotation: k2 writes, k1 still reads; after rekey k1 is no longer needed for payloads.
    second = Keyring({"k2": os.urandom(32), "k1": first.keys["k1"]}, active="k2")
    rotated = replace(PLAIN, keyring=second)
    rekey(db, storage=rotated)
    only_new = replace(PLAIN, keyring=Keyring({"k2": second.keys["k2"]}, active="k2"))
    assert (
        codec.canonical(get_checkpoint(result.run_id, store=db, storage=only_new).state) == expected
    )


def test_rekey_reseals_sensitive_metadata_so_the_old_key_can_go(db: SqliteStore) -> None:
    old = Keyring.parse(f"k1:{new_key()}")
    before = replace(PLAIN, keyring=old, sensitive_metadata=frozenset({"user"}))
    result = run(chatty(), store=db, storage=before, metadata={"user": "ada@example.com"})
    carrying = [h for h in db.list_checkpoints(result.run_id) if "user" in h.metadata]
    assert carrying and all(h.metadata["user"].startswith("$sg:enc:k1:") for h in carrying)
    assert db.get_run(result.run_id).metadata["user"].startswith("$sg:enc:k1:")
    assert get_run(result.run_id, store=db, storage=before).metadata["user"] == "ada@example.com"
    rotated = Keyring({"k2": os.urandom(32), "k1": old.keys["k1"]}, active="k2")
    # Even with "user" no longer configured as sensitive, what was sealed stays sealed.
    rekey(db, storage=replace(PLAIN, keyring=rotated))
    stored = [
        h.metadata["user"] for h in db.list_checkpoints(result.run_id) if "user" in h.metadata
    ]
    assert len(stored) == len(carrying)
    assert all(v.startswith("$sg:enc:k2:") and "ada" not in v for v in stored)
    only_new = replace(PLAIN, keyring=Keyring({"k2": rotated.keys["k2"]}, active="k2"))
    shown = history(result.run_id, store=db, storage=only_new)
    assert {h.metadata["user"] for h in shown if "user" in h.metadata} == {"ada@example.com"}
    # The run row's copy too: resealed under k2, readable with k2 alone.
    assert db.get_run(result.run_id).metadata["user"].startswith("$sg:enc:k2:")
    assert get_run(result.run_id, store=db, storage=only_new).metadata["user"] == "ada@example.com"
    assert list_runs(store=db, storage=only_new)[0].metadata["user"] == "ada@example.com"


def test_listing_runs_leaves_metadata_sealed_under_a_key_it_lacks(db: SqliteStore) -> None:
    """One run sealed under a retired key must not make a listing of every run fail."""
    old = Keyring.parse(f"k0:{new_key()}")
    run(chatty(), store=db, storage=replace(PLAIN, keyring=old, sensitive_metadata=frozenset({"user"})),
        metadata={"user": "old@example.com"})  # fmt: skip
    new = Keyring.parse(f"k1:{new_key()}")
    current = replace(PLAIN, keyring=new, sensitive_metadata=frozenset({"user"}))
    fresh = run(chatty(), store=db, storage=current, metadata={"user": "new@example.com"})
    shown = {r.run_id: r.metadata["user"] for r in list_runs(store=db, storage=current)}
    assert shown[fresh.run_id] == "new@example.com"
    [(_, sealed)] = [(k, v) for k, v in shown.items() if k != fresh.run_id]
    assert sealed.startswith("$sg:enc:k0:")


def test_rekey_needs_a_keyring(db: SqliteStore) -> None:
    with pytest.raises(ConfigurationError, match="rekey needs a keyring"):
        rekey(db, storage=PLAIN)


# -- rekey renames blobs ---------------------------------------------------------------
def documents() -> Workflow:
    """Blobs of every kind: a loose string, bytes, packs, and a pack whose items hold a
    loose blob of their own (a value over 16 KiB inside a list)."""
    wf = Workflow("documents")

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = len(state.get("log", []))
        item: dict[str, Any] = {"n": n, "text": f"note {n} " + "lorem ipsum " * 20}
        if n == 2:
            item["attachment"] = "a long attached document line\n" * 700  # > 16 KiB
        update = {
            "log": [*state.get("log", []), item],
            "doc": f"the contract, version {n}: " + "clause " * 40,
            "raw": bytes(range(256)) * (n + 1),
        }
        return update, ("add" if n < 7 else END)

    return wf


def _blob_names(db: SqliteStore) -> set[str]:
    return {row[0] for row in db._read("SELECT digest FROM blobs")}


def _states(db: SqliteStore, run_id: str, storage: StorageConfig) -> dict[str, bytes]:
    return {
        h.checkpoint_id: codec.canonical(
            get_checkpoint(h.checkpoint_id, store=db, storage=storage).state
        )
        for h in db.list_checkpoints(run_id)
    }


def test_rekey_renames_every_blob_to_a_digest_keyed_by_the_active_key(db: SqliteStore) -> None:
    import hashlib

    result = run(documents(), store=db, storage=PLAIN)
    before = _states(db, result.run_id, PLAIN)
    plain_names = _blob_names(db)
    stored = db.get_blobs(sorted(plain_names))
    plaintexts = {n: _blobs.unseal_blob(n, stored[n], PLAIN, full=True) for n in plain_names}
    # A plain store names a blob by the unkeyed digest of its content: guessable.
    assert all(hashlib.blake2b(p, digest_size=32).hexdigest() == n for n, p in plaintexts.items())
    k1 = replace(PLAIN, keyring=Keyring.parse(f"k1:{new_key()}"))
    report = rekey(db, storage=k1, adopt=True)
    names = _blob_names(db)
    assert names.isdisjoint(plain_names) and report.collected == len(plain_names)
    assert report.blobs == len(names)
    known = {hashlib.blake2b(p, digest_size=32).hexdigest() for p in plaintexts.values()}
    assert names.isdisjoint(known)  # no name is the plaintext's digest any more
    sealed = db.get_blobs(sorted(names))
    for name in names:
        # Each name is its (possibly rewritten) plaintext's digest under k1's blob key.
        assert _blobs.blob_digest(_blobs.unseal_blob(name, sealed[name], k1), k1) == name
    assert _states(db, result.run_id, k1) == before
    assert verify(db, storage=k1).ok
    # Rotation renames again; then k1 can go entirely.
    k2_key = os.urandom(32)
    assert k1.keyring is not None
    rotated = replace(
        PLAIN, keyring=Keyring({"k2": k2_key, "k1": k1.keyring.keys["k1"]}, active="k2")
    )
    rekey(db, storage=rotated)
    only_k2 = replace(PLAIN, keyring=Keyring({"k2": k2_key}, active="k2"))
    renamed = _blob_names(db)
    assert renamed.isdisjoint(names)
    assert _states(db, result.run_id, only_k2) == before
    assert verify(db, storage=only_k2).ok
    # Again under the same key: nothing to rename, everything still loads.
    rekey(db, storage=only_k2)
    assert _blob_names(db) == renamed
    assert _states(db, result.run_id, only_k2) == before


def test_rekey_leaves_a_blob_another_run_still_names_under_its_old_name(
    db: SqliteStore,
) -> None:
    """``rekey --run``: a blob shared with a run that is not rekeyed stays where it is."""
    a = run(documents(), store=db, storage=PLAIN)
    b = run(documents(), store=db, storage=PLAIN)
    shared = {d for h in db.list_checkpoints(a.run_id) for d in h.blobs} & {
        d for h in db.list_checkpoints(b.run_id) for d in h.blobs
    }
    assert shared
    accept = replace(PLAIN, keyring=Keyring.parse(f"k1:{new_key()}"), accept_plaintext=True)
    before_b = _states(db, b.run_id, PLAIN)
    rekey(db, storage=accept, run_id=a.run_id, adopt=True)
    assert shared <= _blob_names(db)
    assert _states(db, b.run_id, accept) == before_b
    assert verify(db, storage=accept).ok


def test_rekey_signs_schedule_rows_so_the_old_key_can_go(db: SqliteStore) -> None:
    first = replace(PLAIN, keyring=Keyring.parse(f"k1:{new_key()}"))
    schedule("nightly", DAILY, cron="@daily", store=db, storage=first)
    plain_row = replace(get_schedule("nightly", store=db), name="plain")
    plain_row = replace(plain_row, checksum=codec.schedule_checksum(plain_row, PLAIN))
    schedules_of(db).put_schedule(plain_row)  # written before keys: an unkeyed check
    second = Keyring({"k2": os.urandom(32), "k1": first.keyring.keys["k1"]}, active="k2")  # type: ignore[union-attr]
    report = rekey(db, storage=replace(PLAIN, keyring=second))
    assert report.schedules == 1
    assert [s.run_id for s in report.skipped] == ["schedule:plain"]  # unkeyed: not vouched for
    only_new = replace(PLAIN, keyring=Keyring({"k2": second.keys["k2"]}, active="k2"))
    assert codec.verify_schedule(get_schedule("nightly", store=db), only_new).name == "nightly"
    adopted = rekey(db, storage=replace(PLAIN, keyring=second), adopt=True)
    assert adopted.schedules == 2 and not adopted.skipped
    # A firing under the new key alone checks both rows.
    assert fire_schedules(store=db, storage=only_new) == []  # neither is due yet


def test_rekey_lists_and_renames_the_files_an_old_fork_record_left_out(
    db: SqliteStore, tmp_path: Path
) -> None:
    """A fork's first record written before savegame listed its workspace files names
    them in its body only: rekey renames them there and lists them, so the collection of
    the old names leaves the fork its files, and verify then passes."""
    wf, run_id, first = legacy_fork(db, tmp_path / "ws")
    keys = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    report = rekey(db, storage=keys, adopt=True)
    assert not report.skipped and report.collected > 0
    assert verify(db, storage=keys).ok, verify(db, storage=keys).damaged
    elsewhere = tmp_path / "elsewhere"
    restore_workspace(
        get_checkpoint(first, store=db, storage=keys), elsewhere, store=db, storage=keys
    )
    assert {p.name: p.read_text() for p in elsewhere.iterdir()} == {"f1.txt": "file 1 " * 40}
    assert resume(run_id, store=db, workflow=wf, storage=keys).state["n"] == 3

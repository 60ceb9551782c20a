"""verify finds damage by id and changes nothing; a load refuses a damaged or swapped blob."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from savegame import run
from savegame.client import get_checkpoint, schedule
from savegame.codec import _blobs
from savegame.codec.crypto import Keyring, new_key
from savegame.errors import CorruptRecordError
from savegame.maintenance._integrity import verify
from savegame.maintenance._reencrypt import rekey
from savegame.model import WORKSPACE_KEY
from savegame.stores import SqliteStore
from tests.maintenance.stocked import PLAIN, chatty, legacy_fork
from tests.runtime.test_schedules import DAILY


def test_verify_a_sound_store(db: SqliteStore) -> None:
    result = run(chatty(), store=db, storage=PLAIN)
    report = verify(db, storage=PLAIN)
    referred = {d for h in db.list_checkpoints(result.run_id) for d in h.blobs}
    assert report.ok and report.runs == 1 and report.checkpoints == 9
    assert report.blobs == len(referred) > 0
    assert verify(db, run_id=result.run_id, storage=PLAIN).checkpoints == 9


def test_verify_reports_damage_by_id(db: SqliteStore) -> None:
    result = run(chatty(), store=db, storage=PLAIN)
    headers = db.list_checkpoints(result.run_id)
    victim = db.get_checkpoint(headers[2].checkpoint_id)
    flipped = bytearray(victim.payload)
    flipped[-1] ^= 0x01
    db.rewrite(records=[replace(victim, payload=bytes(flipped))])
    digest = next(d for h in headers for d in h.blobs)
    blob = db.get_blobs([digest])[digest]
    db.rewrite(blobs={digest: blob[:-1] + bytes([blob[-1] ^ 1])})
    report = verify(db, storage=PLAIN)
    damaged = {(d.kind, d.ident) for d in report.damaged}
    assert ("checkpoint", victim.checkpoint_id) in damaged
    assert ("blob", digest) in damaged
    # Records whose chain runs through the damaged one are not loadable either,
    # but verification itself changed nothing.
    assert db.get_checkpoint(victim.checkpoint_id).payload == bytes(flipped)


# Blobs of ~250 characters, compressed: the frame checksum is what a load checks.
COMPRESSED = replace(PLAIN, compress_threshold=64)


def _a_blob(db: SqliteStore, run_id: str) -> tuple[str, bytes]:
    digest = next(d for h in db.list_checkpoints(run_id) for d in h.blobs)
    return digest, db.get_blobs([digest])[digest]


def test_a_load_refuses_a_compressed_blob_damaged_anywhere(db: SqliteStore) -> None:
    result = run(chatty(), store=db, storage=COMPRESSED)
    digest, blob = _a_blob(db, result.run_id)
    assert blob[4] & 1, "the test needs a zstd-compressed blob"
    for offset in (len(blob) // 2, len(blob) - 1):  # the content, the frame's checksum
        damaged = bytearray(blob)
        damaged[offset] ^= 0x10
        db.rewrite(blobs={digest: bytes(damaged)})
        with pytest.raises(CorruptRecordError, match=digest):
            get_checkpoint(result.run_id, store=db, storage=COMPRESSED)
    db.rewrite(blobs={digest: blob})
    assert get_checkpoint(result.run_id, store=db, storage=COMPRESSED).state["log"]


def test_a_sound_blob_under_another_blobs_name_is_refused_by_a_load_too(db: SqliteStore) -> None:
    """Two blob rows swapped: each passes its own frame checksum, neither is what its name
    says. A load refuses it (the binding of name and bytes), not only verify."""
    result = run(chatty(), store=db, storage=COMPRESSED)
    headers = db.list_checkpoints(result.run_id)
    first, second = sorted({d for h in headers for d in h.blobs})[:2]
    stored = db.get_blobs([first, second])
    db.rewrite(blobs={first: stored[second], second: stored[first]})
    with pytest.raises(CorruptRecordError, match="another blob"):
        for header in headers:
            get_checkpoint(header.checkpoint_id, store=db, storage=COMPRESSED)
    damaged = {(d.kind, d.ident): d.reason for d in verify(db, storage=COMPRESSED).damaged}
    assert "another blob" in damaged["blob", first] and "another blob" in damaged["blob", second]
    # rekey checks too: it refuses the blob rather than seal it as sound.
    encrypted = replace(COMPRESSED, keyring=Keyring.parse(f"k1:{new_key()}"))
    report = rekey(db, storage=encrypted, adopt=True)
    [skipped] = report.skipped
    assert skipped.run_id == result.run_id and "another blob" in skipped.reason
    assert db.get_blobs([first])[first] == stored[second]  # left as it was


def test_a_blob_written_before_the_binding_is_checked_against_its_digest() -> None:
    """Plain blobs from before flag 8 carry no binding: each read hashes them."""
    import hashlib

    import zstandard

    def legacy(data: bytes) -> bytes:  # flags: zstd | frame checksum, no binding
        frame = zstandard.ZstdCompressor(write_checksum=True).compress(data)
        return b"SGB\x01" + bytes([1 | 4, 0]) + frame

    a, b = b"first document " * 50, b"second document " * 50
    name_a, name_b = (hashlib.blake2b(x, digest_size=32).hexdigest() for x in (a, b))
    assert _blobs.unseal_blob(name_a, legacy(a), PLAIN) == a
    with pytest.raises(CorruptRecordError, match="does not match its digest"):
        _blobs.unseal_blob(name_a, legacy(b), PLAIN)
    assert _blobs.unseal_blob(name_b, _blobs.seal_blob(name_b, b, COMPRESSED), PLAIN) == b


def test_verify_checks_schedule_rows(db: SqliteStore) -> None:
    schedule("nightly", DAILY, cron="@daily", store=db)
    assert verify(db).schedules == 1 and verify(db).ok
    with sqlite3.connect(db.path) as conn:
        conn.execute('UPDATE schedules SET input = \'{"team": "evil"}\'')
    report = verify(db)
    assert [(d.kind, d.ident) for d in report.damaged] == [("schedule", "nightly")]


def test_verify_reports_a_fork_record_that_does_not_list_its_workspace_files(
    db: SqliteStore, tmp_path: Path
) -> None:
    """Export and prune do not see the files of a fork's first record written before
    savegame listed them: verify names it, and the blob it leaves out."""
    _, run_id, first = legacy_fork(db, tmp_path / "ws")
    [damage] = verify(db).damaged
    assert (damage.kind, damage.ident, damage.run_id) == ("checkpoint", first, run_id)
    assert "does not list" in damage.reason
    [digest] = {f.digest for f in get_checkpoint(first, store=db).state[WORKSPACE_KEY].values()}
    assert digest in damage.reason

"""Every format savegame ever wrote still loads: golden records and files of formats 1 to 3."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from savegame import MemoryStore, SqliteStore, codec
from savegame.client import rekey
from savegame.client import verify as verify_store
from savegame.codec import (
    decode_value,
    open_entry,
    verify_entry,
)
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    CorruptRecordError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
)
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunStatus,
)
from tests.codec.chains import (
    GOLDEN,
    SECRET,
)


# -- format 1 stays readable ----------------------------------------------------------
def test_format_1_golden_records_decode_and_verify() -> None:
    golden = json.loads((GOLDEN / "format1_records.json").read_text())
    final = base64.b64decode(golden["final_state_canonical_b64"])
    store = MemoryStore()
    for raw in golden["records"]:
        h = raw["header"]
        header = CheckpointHeader(
            thread_id=h["thread_id"], run_id=h["run_id"], checkpoint_id=h["checkpoint_id"],
            parent_id=h["parent_id"], step=h["step"], node=h["node"],
            status=RunStatus(h["status"]), next=h["next"], metadata=h["metadata"],
            format_version=h["format_version"], state_version=h["state_version"], size=h["size"],
        )  # fmt: skip
        payload = base64.b64decode(raw["payload_b64"])
        record = CheckpointRecord(header, payload, raw["checksum"])
        cp = codec.load_state(store, record, StorageConfig())
        assert cp.header.format_version == 1
    assert codec.canonical(cp.state) == final
    with pytest.raises(CorruptRecordError, match="checksum"):
        codec.decode(
            replace(record, payload=record.payload.replace(b"hello", b"HELLO")), StorageConfig()
        )
    with pytest.raises(UnencryptedRecordError):
        codec.decode(record, SECRET)
    for e in golden["effects"]:
        effect = EffectRecord(
            e["run_id"], e["request_id"], EffectKind(e["kind"]), e["name"], e["step"], e["node"],
            e["call_index"], EffectStatus(e["status"]), base64.b64decode(e["arguments_b64"]),
            base64.b64decode(e["result_b64"]), metadata=e["metadata"], checksum=e["checksum"],
        )  # fmt: skip
        verify_entry(effect)
        assert decode_value(open_entry(effect).arguments) == {"q": "a"}


def test_format_1_golden_sqlite_file_loads_through_the_public_api(tmp_path: Path) -> None:
    golden = json.loads((GOLDEN / "format1_records.json").read_text())
    db = tmp_path / "format1.db"
    db.write_bytes((GOLDEN / "format1.db").read_bytes())
    cp = codec_get(f"sqlite:///{db}", "golden-run-1")
    assert codec.canonical(cp.state) == base64.b64decode(golden["final_state_canonical_b64"])
    assert cp.status is RunStatus.COMPLETED


def codec_get(url: str, ident: str) -> Any:
    from savegame.client import get_checkpoint

    return get_checkpoint(ident, store=url, storage=StorageConfig())


def test_format_2_and_3_golden_file_loads_every_checkpoint(tmp_path: Path) -> None:
    """Records written when packs came in (tests/golden/make_format3.py): deltas, loose
    blobs, packed keyframes with tagged values, plain and encrypted, all still load."""
    golden = json.loads((GOLDEN / "format3_states.json").read_text())
    db = tmp_path / "format3.db"
    db.write_bytes((GOLDEN / "format3.db").read_bytes())
    ring = Keyring({"golden": base64.b64decode(golden["key_b64"])}, active="golden")
    storage = StorageConfig(keyring=ring, accept_plaintext=True)
    store = SqliteStore(db)
    try:
        versions = set()
        for checkpoint_id, digest in golden["states"].items():
            record = store.get_checkpoint(checkpoint_id)
            versions.add(record.header.format_version)
            state = codec.load_state(store, record, storage).state
            assert hashlib.sha256(codec.canonical(state)).hexdigest() == digest, checkpoint_id
        assert versions == {2, 3}
        assert verify_store(store=store, storage=storage).ok
    finally:
        store.close()


def test_format_3_encrypted_records_are_refused_until_rekey_authenticates_them(
    tmp_path: Path,
) -> None:
    """Their tag covers the payload and ids, not next or status: with a keyring (and no
    migration mode) they are refused, and rekey makes them format 4 with the same states."""
    golden = json.loads((GOLDEN / "format3_states.json").read_text())
    db = tmp_path / "format3.db"
    db.write_bytes((GOLDEN / "format3.db").read_bytes())
    ring = Keyring({"golden": base64.b64decode(golden["key_b64"])}, active="golden")
    strict = StorageConfig(keyring=ring)
    store = SqliteStore(db)
    try:
        sealed = store.latest_checkpoint("golden-sealed")
        with pytest.raises(UnauthenticatedRecordError, match="savegame rekey"):
            codec.load_state(store, sealed, strict)
        assert not verify_store(store=store, storage=strict).ok
        assert rekey(store=store, storage=strict).skipped  # strict: it vouches for nothing
        report = rekey(store=store, storage=strict, adopt=True)
        assert not report.skipped and report.adopted > 0
        for checkpoint_id, digest in golden["states"].items():
            record = store.get_checkpoint(checkpoint_id)
            assert record.header.format_version == 4
            state = codec.load_state(store, record, strict).state
            assert hashlib.sha256(codec.canonical(state)).hexdigest() == digest, checkpoint_id
        assert verify_store(store=store, storage=strict).ok
    finally:
        store.close()

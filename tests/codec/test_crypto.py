"""Encryption: records, metadata and journal values sealed under a keyring, rotation and refusals."""

from __future__ import annotations

import base64
import subprocess
import sys
from dataclasses import replace

import pytest

from savegame import MemoryStore, codec
from savegame.codec import (
    decode_value,
    encode_value,
    open_entry,
    seal_entry,
    verify_entry,
)
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    CorruptRecordError,
    EncryptionKeyError,
    UnencryptedRecordError,
)
from savegame.ids import new_id
from savegame.model import (
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunStatus,
)
from tests.codec.chains import (
    KEY_A,
    KEY_B,
    PLAIN,
    SECRET,
    Run,
    make_header,
)


# -- encryption ---------------------------------------------------------------------
def test_importing_savegame_or_its_cli_does_not_load_cryptography() -> None:
    """`cryptography` costs about 25 ms to import: only stores with a keyring pay it."""
    code = "import sys, savegame, savegame.cli.app; print('cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_encrypted_records_hide_the_state_and_need_their_key() -> None:
    store = MemoryStore()
    run = Run(store, SECRET, {"card": "4111-1111-1111-1111"})
    record = run.write({"card": "4111-1111-1111-1111", "n": 1}, {"n"})
    assert b"4111" not in record.payload and b"4111" not in run.records[0].payload
    other = replace(SECRET, keyring=Keyring({"b": KEY_B}, active="b"))
    with pytest.raises(EncryptionKeyError, match="'a'"):
        codec.load_state(store, record, other)
    wrong = replace(SECRET, keyring=Keyring({"a": KEY_B}, active="a"))
    with pytest.raises(CorruptRecordError, match="key 'a'"):
        codec.load_state(store, record, wrong)
    with pytest.raises(EncryptionKeyError, match="'a'"):
        codec.load_state(store, record, PLAIN)  # no keyring at all: a setup error naming the key


def test_tampered_ciphertext_and_moved_payloads_are_refused() -> None:
    run = Run(MemoryStore(), SECRET, {"a": 1})
    record = run.records[0]
    flipped = bytearray(record.payload)
    flipped[-1] ^= 1
    with pytest.raises(CorruptRecordError, match=record.checkpoint_id):
        codec.decode(replace(record, payload=bytes(flipped)), SECRET)
    moved = replace(record, header=replace(record.header, checkpoint_id=new_id()))
    with pytest.raises(CorruptRecordError):
        codec.decode(moved, SECRET)


def test_plaintext_records_are_refused_when_encryption_is_configured() -> None:
    run = Run(MemoryStore(), PLAIN, {"a": 1})
    run.write({"a": 2}, {"a"})
    with pytest.raises(UnencryptedRecordError, match=run.records[-1].checkpoint_id):
        codec.load_state(run.store, run.records[-1], SECRET)
    assert run.load() == {"a": 2}
    migrating = replace(SECRET, accept_plaintext=True)
    assert codec.load_state(run.store, run.records[-1], migrating).state == {"a": 2}


def test_rotation_old_key_reads_new_key_writes() -> None:
    store = MemoryStore()
    old = Run(store, SECRET, {"a": 1})
    old.write({"a": 2}, {"a"})
    rotated = replace(SECRET, keyring=Keyring({"b": KEY_B, "a": KEY_A}, active="b"))
    assert codec.load_state(store, old.records[-1], rotated).state == {"a": 2}
    new = Run(store, rotated, {"a": 3})
    record = new.write({"a": 4}, {"a"})
    assert record.payload[5:6] == b"b"
    assert codec.load_state(store, record, rotated).state == {"a": 4}
    with pytest.raises(EncryptionKeyError):
        codec.load_state(store, record, SECRET)


def test_rewrap_of_a_delta_keeps_its_base_and_reseals() -> None:
    first = list(range(100))
    run = Run(MemoryStore(), SECRET, {"log": first})
    record = run.write({"log": [*first, 100]}, {"log"})
    assert record.header.base_id == run.records[0].checkpoint_id
    header = replace(record.header, checkpoint_id=new_id(), parent_id=record.checkpoint_id,
                     status=RunStatus.CANCELLED, base_id=None)  # fmt: skip
    wrapped = codec.rewrap(record, header, SECRET)
    assert wrapped.header.base_id == run.records[0].checkpoint_id
    run.store.put_checkpoint(wrapped, lease_token=run.token)
    assert codec.load_state(run.store, wrapped, SECRET).state == {"log": list(range(101))}


def test_sensitive_metadata_is_sealed_and_revealed() -> None:
    storage = replace(SECRET, sensitive_metadata=frozenset({"email"}))
    header = replace(
        make_header("r1", 0, None), metadata={"email": "ada@example.com", "tier": "gold"}
    )
    record = codec.encode(header, {"a": 1}, storage)
    assert record.header.metadata["tier"] == "gold"
    assert "ada" not in str(record.header.metadata["email"])
    assert codec.decode(record, storage).metadata["email"] == "ada@example.com"


def test_journal_values_are_encrypted_at_rest() -> None:
    effect = EffectRecord(
        "r1", "r1:1:0", EffectKind.WRITE, "pay", 1, "s", 0, EffectStatus.DONE,
        encode_value({"card": "4111"}, "args"), encode_value("ok", "result"),
    )  # fmt: skip
    stored = verify_entry(seal_entry(effect, SECRET), SECRET)
    assert b"4111" not in stored.arguments
    assert decode_value(open_entry(stored, SECRET).arguments) == {"card": "4111"}
    assert seal_entry(stored, SECRET).arguments == stored.arguments  # not encrypted twice
    swapped = replace(stored, request_id="r1:1:1")
    with pytest.raises(CorruptRecordError):
        open_entry(swapped, SECRET)
    with pytest.raises(UnencryptedRecordError):
        open_entry(seal_entry(effect, PLAIN), SECRET)


def test_keyring_from_environment_spec() -> None:
    spec = f"k2:{base64.b64encode(KEY_B).decode()},k1:{base64.b64encode(KEY_A).decode()}"
    config = StorageConfig.from_env({"SAVEGAME_KEYS": spec, "SAVEGAME_KEYFRAME_EVERY": "4"})
    assert config.keyring is not None and config.keyring.active == "k2"
    assert set(config.keyring.keys) == {"k1", "k2"} and config.keyframe_every == 4

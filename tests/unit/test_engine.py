"""The storage engine: keyframes and deltas load back byte for byte, blobs, compression, keys."""

from __future__ import annotations

import base64
import collections
import gc
import hashlib
import itertools
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from savegame import MemoryStore, SqliteStore, codec, rekey
from savegame import verify as verify_store
from savegame.codec import (
    _blobs,
    _engine,
    _envelope,
    _packs,
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
    SerializationError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
)
from savegame.ids import new_id
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    utcnow,
)

GOLDEN = Path(__file__).parent.parent / "golden"
KEY_A, KEY_B = os.urandom(32), os.urandom(32)
RING_A = Keyring({"a": KEY_A}, active="a")
PLAIN = StorageConfig(keyframe_every=3, blob_threshold=64, compress_threshold=128)
SECRET = replace(PLAIN, keyring=RING_A)


def _header(run_id: str, step: int, parent: str | None) -> CheckpointHeader:
    return CheckpointHeader(
        thread_id=run_id, run_id=run_id, checkpoint_id=new_id(), parent_id=parent,
        step=step, node="s" if step else None, status=RunStatus.RUNNING, next="s",
    )  # fmt: skip


class Run:
    """Writes successive states of one run through an Encoder into a real MemoryStore."""

    def __init__(self, store: MemoryStore, storage: StorageConfig, state: dict[str, Any]) -> None:
        self.store, self.storage, self.run_id = store, storage, new_id()
        first = codec.encode(_header(self.run_id, 0, None), state, storage)
        now = utcnow()
        info = RunInfo(self.run_id, self.run_id, "engine", None, RunStatus.RUNNING, 0,
                       first.checkpoint_id, now, now)  # fmt: skip
        self.token = store.create_run(info, first, owner="test:1:1", ttl=60).token
        self.records = [first]
        self.encoder = codec.Encoder(
            storage, base=first, state=state, chain=codec.Chain(0, 0, first.header.size)
        )

    def write(self, state: dict[str, Any], changed: Any) -> Any:
        header = _header(self.run_id, len(self.records), self.records[-1].checkpoint_id)
        encoded = self.encoder.encode(header, state, changed)
        blobs = self.encoder.to_upload(self.store, encoded)
        self.store.put_checkpoint(encoded.record, lease_token=self.token, blobs=blobs or None)
        self.encoder.committed(self.store, encoded.record)
        self.records.append(encoded.record)
        return encoded.record

    def load(self, index: int = -1) -> dict[str, Any]:
        return codec.load_state(self.store, self.records[index], self.storage).state


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
    from savegame.inspect import get_checkpoint

    return get_checkpoint(ident, store=url, storage=StorageConfig())


# -- any sequence of updates loads back equal ---------------------------------------------
keys = st.sampled_from(["a", "b", "c", "log", "doc"])
leaf = st.one_of(
    st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False, width=32),
    st.text(max_size=5), st.binary(max_size=4),
    st.text(alphabet="xyz", min_size=60, max_size=200), st.binary(min_size=70, max_size=120),
)  # fmt: skip
tree = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("pqrs"), inner, max_size=3),
        st.tuples(inner), st.dictionaries(st.integers(0, 2), inner, max_size=2),
    ),
    max_leaves=8,
)  # fmt: skip
ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "append", "nested", "drop", "same", "inplace", "splice"]), keys, tree
    ),
    min_size=1, max_size=12,
)  # fmt: skip


def _step(state: dict[str, Any], op: str, key: str, value: Any) -> tuple[dict[str, Any], set[str]]:
    new = dict(state)
    old = state.get(key)
    if op == "append" and type(old) is list:
        new[key] = [*old, value]
    elif op == "inplace" and type(old) is list:
        old.append(value)  # a top-level list appended in place, returned in the update
    elif op == "nested" and type(old) is dict:
        inner = dict(old)
        if inner and value is None:
            inner.pop(next(iter(inner)))
        else:
            inner["q" if type(value) is not dict else "r"] = value
        new[key] = inner
    elif op == "splice" and type(old) is list and old:
        # An edit in the middle, in a new list: replace, insert or remove one item.
        at = len(old) // 2
        choice = len(repr(value)) % 3
        middle = [value] if choice == 0 else [value, old[at]] if choice == 1 else []
        new[key] = [*old[:at], *middle, *old[at + 1 :]]
    elif op == "drop":
        new.pop(key, None)
    elif op == "same":
        pass
    else:
        new[key] = value
    return new, {key}


CONFIGS = {
    "k2-plain": replace(PLAIN, keyframe_every=2),
    "k3-compress-encrypt": SECRET,
    "k32-plain-no-blobs": StorageConfig(keyframe_every=32, blob_threshold=0, compress_threshold=0),
    "k32-all": replace(SECRET, keyframe_every=32, compress_threshold=16),
    # Packs of a few items, so lists of every shape get packed (nested, tagged, emptied).
    "k4-packs": replace(PLAIN, keyframe_every=4, pack_bytes=24),
    "k8-packs-encrypt": replace(SECRET, keyframe_every=8, pack_bytes=64, compress_threshold=16),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, first=st.dictionaries(keys, tree, max_size=3))
def test_every_checkpoint_loads_back_equal(name: str, ops: Any, first: dict[str, Any]) -> None:
    storage = CONFIGS[name]
    run = Run(MemoryStore(), storage, first)
    states = [codec.canonical(first)]
    state = dict(first)
    for op, key, value in ops:
        state, changed = _step(state, op, key, value)
        record = run.write(state, changed)
        # From format 4 every record carries it: its identity covers the whole header.
        assert record.header.format_version == 4
        states.append(codec.canonical(state))
    for i, expected in enumerate(states):
        assert codec.canonical(run.load(i)) == expected, i
    depth = max(len(run.store.get_chain(r.checkpoint_id)) for r in run.records)
    assert depth <= storage.keyframe_every


def test_deltas_stay_small_as_the_state_grows() -> None:
    storage = StorageConfig(compress_threshold=0)
    state: dict[str, Any] = {"log": [], "n": 0}
    run = Run(MemoryStore(), storage, state)
    for i in range(200):
        state = {**state, "log": [*state["log"], {"i": i, "text": f"entry {i}"}], "n": i}
        run.write(state, {"log", "n"})
    deltas = [r for r in run.records if r.header.base_id is not None]
    assert len(deltas) > 150
    assert max(r.header.size for r in deltas) < 120
    assert codec.canonical(run.load()) == codec.canonical(state)


def test_large_values_are_stored_once_as_blobs_across_runs() -> None:
    store = MemoryStore()
    doc = "lorem ipsum " * 500
    one = Run(store, PLAIN, {"x": 1})
    one.write({"x": 1, "doc": doc}, {"doc"})
    two = Run(store, PLAIN, {"x": 2})
    two.write({"x": 2, "doc": doc}, {"doc"})
    assert one.records[-1].header.blobs == two.records[-1].header.blobs != ()
    assert store.stats().blobs == 1
    assert len(one.records[-1].payload) < 200
    assert run_load(two)["doc"] == doc


# -- packs: long lists stored once, in runs of items ------------------------------------
PACKED = StorageConfig(keyframe_every=4, pack_bytes=2048, compress_threshold=128)


def _message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 else "assistant", "content": f"message {i}: " + "words " * 50}


def _grow(run: Run, steps: int, key: str = "messages") -> dict[str, Any]:
    state: dict[str, Any] = {"n": 0, key: []}
    for i in range(steps):
        state = {**state, "n": i, key: [*state[key], _message(i)]}
        run.write(state, {"n", key})
    return state


def _packs_of(run: Run, record: CheckpointRecord) -> list[str]:
    body = codec.open_record(record, run.storage)[1]
    messages = json.loads(body)["messages"]
    return list(messages["$sg:pack"][0]) if isinstance(messages, dict) else []


def test_a_growing_list_is_packed_once_and_every_checkpoint_loads_back() -> None:
    store = AskCounting()
    run = Run(store, PACKED, {"n": 0, "messages": []})
    state = _grow(run, 60)
    keyframes = [r for r in run.records[1:] if r.header.base_id is None]
    assert len(keyframes) >= 10
    packs = [found for found in (_packs_of(run, r) for r in keyframes) if found]
    # Chunk boundaries never move: each keyframe's packs start with the previous one's.
    for older, newer in itertools.pairwise(packs):
        assert newer[: len(older)] == older
    # So each pack is stored once, and the keyframe refers to packs, not to items.
    assert store.stats().blobs == len(packs[-1]) == len(set(packs[-1]))
    assert len(packs[-1]) < 60 // 3
    # A step's delta holds its new message inline: no blob, no second row.
    assert all(r.header.blobs == () for r in run.records if r.header.base_id is not None)
    for i in range(len(run.records)):
        expected = [_message(j) for j in range(i)]
        assert codec.canonical(run.load(i)["messages"]) == codec.canonical(expected), i
    assert run.load() == state


def _last_keyframe(run: Run) -> CheckpointRecord:
    return next(r for r in reversed(run.records) if r.header.base_id is None)


@pytest.mark.parametrize("edit", ["replace", "insert", "remove"])
def test_an_edit_in_the_middle_of_a_list_repacks_only_the_chunk_around_it(edit: str) -> None:
    """Chunk ends are content-defined: an edited, inserted or removed item changes the
    pack it falls in (and perhaps its neighbour), not every pack after it."""
    run = Run(MemoryStore(), PACKED, {"n": 0, "messages": []})
    state = _grow(run, 80)
    run.write(state, None)
    before = _packs_of(run, _last_keyframe(run))
    assert len(before) >= 10
    messages = list(state["messages"])
    if edit == "replace":
        messages[20] = {**messages[20], "content": "redacted"}
    elif edit == "insert":
        messages.insert(20, {"role": "user", "content": "inserted " * 30})
    else:
        del messages[20]
    state = {**state, "messages": messages}
    run.write(state, None)
    after = _packs_of(run, _last_keyframe(run))
    # At most the chunk the edit fell in and its neighbour are new; the rest are reused.
    assert len(set(after) - set(before)) <= 2, (before, after)
    assert len(set(after) & set(before)) >= len(before) - 2
    assert codec.canonical(run.load()) == codec.canonical(state)


def test_a_pack_another_store_lacks_is_built_again() -> None:
    """The encoder drops a pack's bytes once stored; a store without it still gets it."""
    run = Run(MemoryStore(), PACKED, {"n": 0, "messages": []})
    state = _grow(run, 30)
    header = _header(run.run_id, 31, run.records[-1].checkpoint_id)
    encoded = run.encoder.encode(header, state, None)  # a keyframe
    assert encoded.deferred  # packs stored by earlier keyframes
    elsewhere = MemoryStore()
    sent = run.encoder.to_upload(elsewhere, encoded)
    assert set(sent) == set(encoded.record.header.blobs)
    items = []
    for name in _packs_of(run, encoded.record):
        items += json.loads(_blobs.unseal_blob(name, sent[name], PACKED, full=True))
    packed_count = len(items)
    assert items == state["messages"][:packed_count] and packed_count >= 20


def test_a_damaged_pack_is_refused_by_name() -> None:
    store = MemoryStore()
    run = Run(store, PACKED, {"n": 0, "messages": []})
    _grow(run, 20)
    keyframe = next(r for r in reversed(run.records) if r.header.base_id is None)
    victim = _packs_of(run, keyframe)[0]
    data = store.get_blobs([victim])[victim]
    store.rewrite(blobs={victim: data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]})
    with pytest.raises(CorruptRecordError, match=f"blob {victim}"):
        codec.load_state(store, keyframe, PACKED)


def test_a_load_holds_one_packs_plaintext_at_a_time_and_leaves_no_garbage() -> None:
    """Packs are decompressed as the walk reaches them and freed once parsed, so what
    decoding allocates beyond its result stays well under the plaintext of all its packs
    (it held all of them at once before: 4 MB at 2,000 messages). And nothing of a load
    waits for the cycle collector: the blobs it read go when it returns."""
    store = MemoryStore()
    run = Run(store, PACKED, {"n": 0, "messages": []})
    state = {"n": 1, "messages": [_message(i) for i in range(1200)]}
    keyframe = run.write(state, None)  # most messages in packs
    names = _packs_of(run, keyframe)
    assert len(names) >= 150
    stored = store.get_blobs(names)
    plaintext = sum(len(_blobs.unseal_blob(n, stored[n], PACKED)) for n in names)
    body = codec.open_record(keyframe, PACKED)[1]

    def fetch(wanted: Sequence[str]) -> dict[str, bytes]:
        return {name: stored[name] for name in wanted}

    codec.load_state(store, keyframe, PACKED)  # first-call allocations are not the subject
    gc.collect()
    gc.disable()
    try:
        loaded = codec.load_state(store, keyframe, PACKED)
        garbage = gc.collect()
        # The decoding alone, so what the store allocates to answer is not counted.
        tracemalloc.start()
        try:
            tree, _ = _envelope.parse(body, keyframe, fetch, PACKED)
            gc.collect()  # whatever a cycle would keep does not count as kept
            kept, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        gc.enable()
    assert loaded.state == state == tree
    assert garbage == 0
    # About 0.2 of the plaintext here; all of it and more before.
    assert peak - kept < plaintext / 2, (peak - kept, plaintext)


def test_a_value_in_many_places_is_unsealed_at_most_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blobs are named by content: one long string in 20 places, and one list kept under
    two keys, are one blob and one set of packs with many references each. A load does
    not unseal them once per place, and the places still get containers of their own."""
    store = MemoryStore()
    run = Run(store, PACKED, {"n": 0})
    long = "lorem ipsum " * 500
    messages = [_message(i) for i in range(40)]
    state: dict[str, Any] = {f"doc{i}": long for i in range(20)}
    state.update(n=1, messages=messages, again=list(messages))
    record = run.write(state, None)
    body = json.loads(codec.open_record(record, PACKED)[1])
    packs = body["messages"]["$sg:pack"][0]
    assert len(packs) >= 4 and body["again"]["$sg:pack"][0] == packs  # shared by the two
    calls: collections.Counter[str] = collections.Counter()
    real = _blobs.unseal_blob

    def counting(name: str, *args: Any, **kwargs: Any) -> bytes:
        calls[name] += 1
        return real(name, *args, **kwargs)

    monkeypatch.setattr(_blobs, "unseal_blob", counting)
    loaded = codec.load_state(store, record, PACKED).state
    assert loaded == state
    assert set(calls) == set(record.header.blobs) and max(calls.values()) <= 2
    assert len({id(loaded[f"doc{i}"]) for i in range(20)}) == 1  # decoded once, shared
    assert loaded["messages"][0] is not loaded["again"][0]


def test_tagged_values_inside_packs_are_revived() -> None:
    """Only packed items hold tags here: the keyframe's own body gives no hint to revive."""
    run = Run(MemoryStore(), PACKED, {"messages": []})
    state: dict[str, Any] = {"messages": []}
    for i in range(16):
        item = {**_message(i), "at": (i, b"\x00")} if i < 8 else _message(i)
        state = {"messages": [*state["messages"], item]}
        run.write(state, {"messages"})
    run.write(state, None)  # a keyframe
    raw = codec.open_record(run.records[-1], PACKED)[1]
    assert raw.count(b'"$sg:') == raw.count(b'"$sg:pack"') == 1
    loaded = run.load()
    assert loaded["messages"][0]["at"] == (0, b"\x00")
    assert codec.canonical(loaded) == codec.canonical(state)


def test_a_stop_marker_on_a_packed_keyframe_is_format_4_and_loads() -> None:
    store = MemoryStore()
    run = Run(store, PACKED, {"n": 0, "messages": []})
    state = _grow(run, 12)
    run.write(state, None)  # a keyframe
    latest = run.records[-1]
    assert latest.header.format_version == 4
    stop = codec.marker(latest, RunStatus.CANCELLED, {}, PACKED)
    # An older reader refuses it by its version instead of failing on the pack tag.
    assert stop.header.format_version == 4
    store.put_checkpoint(stop, lease_token=run.token, blobs=None)
    assert codec.load_state(store, stop, PACKED).state == state


@pytest.mark.parametrize(
    "storage", [PACKED, replace(PACKED, keyring=RING_A)], ids=["plain", "sealed"]
)
def test_a_packed_keyframe_cannot_pass_for_an_older_format(storage: StorageConfig) -> None:
    """The version is bound into the checksum or the AES-GCM tag: a header edited to say
    2 or 3 (so an old reader would try it, or a check that covers less) is refused."""
    store = MemoryStore()
    run = Run(store, storage, {"n": 0, "messages": []})
    state = _grow(run, 12)
    run.write(state, None)
    keyframe = run.records[-1]
    assert keyframe.header.format_version == 4
    for older in (2, 3):
        forged = replace(keyframe, header=replace(keyframe.header, format_version=older))
        with pytest.raises(CorruptRecordError, match=keyframe.checkpoint_id):
            codec.load_state(store, forged, storage)
    assert codec.load_state(store, keyframe, storage).state == state


def test_a_growing_dict_below_the_state_is_packed_too() -> None:
    """{call_id: result} grows like a list: its entries go into packs ([key, value] pairs),
    each stored once; a list or dict inside it is walked into, not packed whole; the
    state itself keeps its shape."""
    store = MemoryStore()
    run = Run(store, PACKED, {"n": 0, "results": {}})
    state: dict[str, Any] = {"n": 0, "results": {}}
    states = [state]
    for i in range(40):
        results = {**state["results"], f"call-{i}": _message(i)}
        if i == 20:
            results["history"] = [_message(j) for j in range(60)]  # over 16 KiB: walked into
        state = {"n": i, "results": results}
        run.write(state, {"n", "results"})
        states.append(state)
    run.write(state, None)
    states.append(state)
    body = json.loads(codec.open_record(run.records[-1], PACKED)[1])
    assert set(body) == {"n", "results"}
    packed = body["results"]["$sg:dpack"]
    assert len(packed[0]) >= 3 and "$sg:pack" in packed[1]["history"]
    assert all(r.header.blobs == () for r in run.records if r.header.base_id is not None)
    keyframes = [_last_keyframe_before(run, i) for i in (30, len(run.records) - 1)]
    older, newer = (json.loads(codec.open_record(k, PACKED)[1]) for k in keyframes)
    shared = set(older["results"]["$sg:dpack"][0]) & set(newer["results"]["$sg:dpack"][0])
    assert len(shared) >= len(older["results"]["$sg:dpack"][0]) - 2
    for i, expected in enumerate(states):
        assert codec.canonical(run.load(i)) == codec.canonical(expected), i


def _last_keyframe_before(run: Run, index: int) -> CheckpointRecord:
    return next(r for r in reversed(run.records[: index + 1]) if r.header.base_id is None)


def test_user_values_shaped_like_packs_round_trip() -> None:
    """User keys named like the pack tag, in keyframes with and without packs and in deltas."""
    run = Run(MemoryStore(), PACKED, {"one": {"$sg:pack": 1}, "two": {"$sg:pack": 1, "y": 2}})
    fake = {"$sg:pack": [["0" * 64], [], []]}
    state: dict[str, Any] = {"n": 0, "fake": fake, "messages": []}
    states = [{"one": {"$sg:pack": 1}, "two": {"$sg:pack": 1, "y": 2}}]
    for i in range(12):
        item = fake if i % 3 == 0 else _message(i)
        state = {**state, "messages": [*state["messages"], item], "two": {"$sg:pack": i, "y": 2}}
        run.write(state, {"messages", "two"})
        states.append(state)
    run.write(state, None)  # a keyframe
    states.append(state)
    assert run.records[-1].header.format_version == 4
    for i, expected in enumerate(states):
        assert codec.canonical(run.load(i)) == codec.canonical(expected), i


def test_a_pack_changed_in_place_is_never_sent_under_its_old_name() -> None:
    """Items are matched by identity; one mutated in place (against the contract) after it
    was packed no longer encodes to its pack. Rebuilding that pack for a store that lacks it
    must fail by path, not send other bytes under the pack's name."""
    run = Run(MemoryStore(), PACKED, {"n": 0, "messages": []})
    state = _grow(run, 30)
    state["messages"][1]["content"] = "changed in place"
    header = _header(run.run_id, 31, run.records[-1].checkpoint_id)
    encoded = run.encoder.encode(header, state, None)
    with pytest.raises(SerializationError, match=r"state\.messages\[\d+:\d+\].*in place"):
        run.encoder.to_upload(MemoryStore(), encoded)
    # That chunk is packed again from the items as they are now.
    again = run.encoder.encode(_header(run.run_id, 31, run.records[-1].checkpoint_id), state, None)
    elsewhere = MemoryStore()
    sent = run.encoder.to_upload(elsewhere, again)
    items = []
    for name in _packs_of(run, again.record):
        items += json.loads(_blobs.unseal_blob(name, sent[name], PACKED, full=True))
    assert items[1]["content"] == "changed in place"


def test_a_pack_changed_in_place_to_something_unencodable_is_named_the_same_way() -> None:
    """A lone surrogate set in place makes the rebuild fail in orjson, not on the digest."""
    run = Run(MemoryStore(), PACKED, {"n": 0, "messages": []})
    state = _grow(run, 30)
    state["messages"][1]["content"] = "changed in place \ud800"
    encoded = run.encoder.encode(
        _header(run.run_id, 31, run.records[-1].checkpoint_id), state, None
    )
    with pytest.raises(SerializationError, match=r"state\.messages\[\d+:\d+\].*in place"):
        run.encoder.to_upload(MemoryStore(), encoded)
    # Packed again from the items as they are now, the surrogate is named where it sits.
    with pytest.raises(SerializationError, match="lone surrogate") as info:
        run.encoder.encode(_header(run.run_id, 31, run.records[-1].checkpoint_id), state, None)
    assert info.value.path == "state.messages[1].content"


def test_commits_reported_from_another_thread_do_not_race_the_next_keyframe() -> None:
    """With durability="async" the writer thread reports commits while the run's thread
    packs the next keyframe (whose list paths may come and go)."""
    packer = _packs.Packer(replace(PACKED, pack_bytes=64))
    items = [{"m": "x" * 40, "i": i} for i in range(20)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def report() -> None:
        while not stop.is_set():
            try:
                packer.committed(["0" * 64])
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=report)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread.start()
    try:
        for i in range(2000):
            packer.tree({f"k{j}": items for j in range(i % 7)}, _packs.Packed())
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert errors == []


def test_lists_in_nested_dicts_are_packed_and_lists_in_lists_are_not() -> None:
    run = Run(MemoryStore(), PACKED, {"chat": {"messages": []}, "grid": []})
    state: dict[str, Any] = {"chat": {"messages": []}, "grid": []}
    for i in range(20):
        state = {
            "chat": {"messages": [*state["chat"]["messages"], _message(i)]},
            "grid": [[_message(i)] for i in range(i)],
        }
        run.write(state, {"chat", "grid"})
    run.write(state, None)
    raw = codec.open_record(run.records[-1], PACKED)[1]
    body = json.loads(raw)
    assert "$sg:pack" in body["chat"]["messages"] and "$sg:pack" in body["grid"]
    assert raw.count(b'"$sg:pack"') == 2  # the inner lists go whole into the grid's packs
    assert codec.canonical(run.load()) == codec.canonical(state)


class AskCounting(MemoryStore):
    """A real MemoryStore that counts how often the encoder asks which blobs it lacks."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        self.asked += 1
        return super().missing_blobs(digests)


def test_small_new_blobs_are_sent_without_asking_and_large_ones_only_when_missing() -> None:
    store = AskCounting()
    small = "a small message, " * 40  # a blob under PLAIN, far under ASK_ABOVE
    large = "".join(f"line {i} of a long shared document\n" for i in range(3000))
    assert len(small.encode()) < _engine.ASK_ABOVE < len(large.encode())
    # Keyframes only: a delta keeps values up to INLINE_MAX inline, without blobs.
    storage = replace(PLAIN, keyframe_every=1)
    one = Run(store, storage, {"x": 1})
    one.write({"x": 1, "msg": small, "doc": large}, {"msg", "doc"})
    assert store.asked == 1  # the large one made it ask once, for both
    # Another process (nothing known) writes the same values: the small blob is sent
    # again without asking and the store keeps its one copy; the large one is not sent.
    _blobs.known_blobs.forget(store)
    two = Run(store, storage, {"x": 2})
    header = _header(two.run_id, 1, two.records[-1].checkpoint_id)
    encoded = two.encoder.encode(header, {"x": 2, "msg": small}, {"msg"})
    assert set(two.encoder.to_upload(store, encoded)) == set(encoded.blobs)
    assert store.asked == 1
    encoded = two.encoder.encode(header, {"x": 2, "doc": large}, {"doc"})
    assert two.encoder.to_upload(store, encoded) == {}
    assert store.asked == 2
    two.write({"x": 2, "msg": small, "doc": large}, {"msg", "doc"})
    assert store.stats().blobs == 2
    assert run_load(two) == {"x": 2, "msg": small, "doc": large}


def run_load(run: Run) -> dict[str, Any]:
    return run.load()


def test_blobs_written_before_frame_checksums_are_still_checked_by_digest() -> None:
    """A compressed blob from before flag 4 has no frame checksum: its digest is what guards it."""
    text = ("lorem ipsum dolor " * 300).encode()
    name = _blobs.blob_digest(text, PLAIN)
    legacy = b"SGB\x01" + bytes([1, 0]) + zstandard.ZstdCompressor(level=3).compress(text)
    assert _blobs.unseal_blob(name, legacy, PLAIN) == text
    other = ("sit amet consectetur " * 300).encode()
    swapped = b"SGB\x01" + bytes([1, 0]) + zstandard.ZstdCompressor(level=3).compress(other)
    with pytest.raises(CorruptRecordError, match="does not match its digest"):
        _blobs.unseal_blob(name, swapped, PLAIN)
    # The flag alone is not trusted: a frame without a checksum is checked by digest.
    forged = b"SGB\x01" + bytes([1 | 4, 0]) + zstandard.ZstdCompressor(level=3).compress(other)
    with pytest.raises(CorruptRecordError, match="does not match its digest"):
        _blobs.unseal_blob(name, forged, PLAIN)
    # New blobs carry the checksum flag and still round-trip.
    sealed_now = _blobs.seal_blob(name, text, PLAIN)
    assert sealed_now[4] == 1 | 4 | 8  # zstd, frame checksum, bound to its name
    assert _blobs.unseal_blob(name, sealed_now, PLAIN, full=True) == text


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
    header = replace(_header("r1", 0, None), metadata={"email": "ada@example.com", "tier": "gold"})
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

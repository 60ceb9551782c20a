"""Packs: long lists stored once, in runs of items."""

from __future__ import annotations

import collections
import gc
import itertools
import json
import sys
import threading
import tracemalloc
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from savegame import MemoryStore, codec
from savegame.codec import (
    _blobs,
    _envelope,
    _packs,
    _refs,
    _values,
)
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    CorruptRecordError,
    SerializationError,
)
from savegame.model import (
    CheckpointRecord,
    RunStatus,
)
from tests.codec.chains import (
    RING_A,
    AskCounting,
    Run,
    make_header,
)

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
    header = make_header(run.run_id, 31, run.records[-1].checkpoint_id)
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


def test_a_pack_of_tags_and_long_strings_is_walked_and_one_of_tags_alone_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tagged pack holds tags (a message each) or blob references (a string too long to
    stay inline). Only a reference needs the resolver's walk; both load back."""
    walked: list[Any] = []
    real = _refs._Resolver.walk

    def counting(self: Any, node: Any) -> Any:
        walked.append(node)
        return real(self, node)

    monkeypatch.setattr(_refs._Resolver, "walk", counting)
    tags = [{"at": {"$sg:tuple": [i, "x"]}, "content": f"message {i}"} for i in range(3)]
    referring = [*tags, {"content": {_refs.TAG: ["s", "long"]}}]
    blobs = {
        "tags": orjson.dumps(tags),
        "referring": orjson.dumps(referring),
        "long": b"long " * 4000,
    }
    for name, items in (("tags", tags), ("referring", referring)):
        resolver = _refs._Resolver(blobs.get, "r")
        walked.clear()
        got = resolver.unpack([[name], [], [name]])
        assert resolver.revive  # the tags still revive
        assert [len(p) for p in walked if type(p) is list and p and type(p[0]) is dict] == (
            [] if name == "tags" else [len(items)]
        )
        assert got[:3] == tags and (name == "tags" or got[3] == {"content": "long " * 4000})


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.one_of(st.text(), st.integers(-(2**63), 2**63 - 1), st.none()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(), inner, max_size=3)
        ),
        max_leaves=12,
    ),
    st.sampled_from([_refs.TAG, _refs.PACK, _refs.DICT_PACK]),
)
def test_a_body_with_a_reference_is_never_taken_for_one_without(tree: Any, key: str) -> None:
    """``has_references`` may say yes to text that looks like a reference (a walk for
    nothing), never no to a body that holds one, wherever it sits."""
    assert _refs.has_references(orjson.dumps([tree, {key: ["s", "x"]}]))
    assert _refs.has_references(orjson.dumps({"k": {key: ["s", "x"]}, "t": tree}))
    plain = orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
    if _refs.has_references(plain):
        assert any(k.encode() in plain for k in (_refs.TAG, _refs.PACK, _refs.DICT_PACK))


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
    header = make_header(run.run_id, 31, run.records[-1].checkpoint_id)
    encoded = run.encoder.encode(header, state, None)
    with pytest.raises(SerializationError, match=r"state\.messages\[\d+:\d+\].*in place"):
        run.encoder.to_upload(MemoryStore(), encoded)
    # That chunk is packed again from the items as they are now.
    again = run.encoder.encode(
        make_header(run.run_id, 31, run.records[-1].checkpoint_id), state, None
    )
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
        make_header(run.run_id, 31, run.records[-1].checkpoint_id), state, None
    )
    with pytest.raises(SerializationError, match=r"state\.messages\[\d+:\d+\].*in place"):
        run.encoder.to_upload(MemoryStore(), encoded)
    # Packed again from the items as they are now, the surrogate is named where it sits.
    with pytest.raises(SerializationError, match="lone surrogate") as info:
        run.encoder.encode(make_header(run.run_id, 31, run.records[-1].checkpoint_id), state, None)
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


# -- a keyframe too small to pack: the same tree without the chunking walk ---------------
_text = st.builds(
    lambda n, c: c * n, st.integers(0, 20_000) | st.integers(0, 40), st.sampled_from("a$é")
)
_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.binary(max_size=3000) | _text
_data = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(
    # One lone "$sg:" key is not a plain dict: tree() escapes it whole, on neither path.
    state=st.dictionaries(st.text(max_size=6), _data, max_size=6).filter(_values.plain_dict),
    pack_bytes=st.sampled_from([256, 512, 32 * 1024, 256 * 1024]),
)
def test_a_keyframe_tree_is_the_chunking_walks_whether_or_not_it_is_small(
    state: dict[str, Any], pack_bytes: int
) -> None:
    # Below an eighth of pack_bytes no chunk closes, so Packer.tree skips the chunking walk
    # (a LangGraph thread's first keyframe): its tree and blobs must be the walk's (a
    # string in a list over inline_max and one elsewhere over blob_threshold as blobs),
    # and a state the walk packs anything of must not take that path.
    storage = StorageConfig(pack_bytes=pack_bytes)
    trees = {k: _values.encode_at(v, _values.MAX_DEPTH - 1) for k, v in state.items()}
    got, walked = _packs.Packed(), _packs.Packed()
    tree = _packs.Packer(storage, trees=True).tree(trees, got)
    expected = _packs.Packer(storage, trees=True)._dict(trees, "state", (), walked, set())
    assert orjson.dumps(tree) == orjson.dumps(expected)
    assert got.found == walked.found and got.sealed.keys() == walked.sealed.keys()


@settings(max_examples=400, deadline=None)
@given(
    value=_data
    | st.binary(max_size=400)
    | st.dictionaries(st.sampled_from(["$sg:blob", "$x", "k"]), st.binary(max_size=200))
    | st.tuples(_data, _data)
    | st.frozensets(st.integers(), max_size=4),
    slack=st.integers(0, 8),
)
def test_a_pack_entry_within_the_limit_is_what_the_walk_would_give(value: Any, slack: int) -> None:
    # Packer._chunked walks an entry for blob references only when its JSON is longer
    # than the limit: within it the walk must give the tree back as it is, tags and all
    # (bytes, escaped keys, tuples, sets, big numbers), and find no blob.
    tree = _values.encode_at(value, _values.MAX_DEPTH - 2)
    limit = len(orjson.dumps(tree)) + slack
    found: dict[str, bytes] = {}
    walked = _refs.extract(tree, StorageConfig(), found, limit=limit)
    assert orjson.dumps(walked) == orjson.dumps(tree) and not found


def test_a_packed_list_that_shrank_below_packing_is_stored_whole_again() -> None:
    storage = StorageConfig(pack_bytes=2048)
    packer = _packs.Packer(storage, trees=True)
    long = {"messages": [_message(i) for i in range(40)]}
    assert _packs.TAG in orjson.dumps(packer.tree(long, _packs.Packed())).decode()
    short = {"messages": long["messages"][:1]}
    out = _packs.Packed()
    assert packer.tree(short, out) == short and not out.sealed and not out.deferred
    assert _packs.TAG in orjson.dumps(packer.tree(long, out := _packs.Packed())).decode()

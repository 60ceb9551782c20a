"""The encoder: keyframes and deltas, whatever the sequence of updates, load back equal and stay small."""

from __future__ import annotations

import collections
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import savegame
from savegame import MemoryStore, codec
from savegame.codec import _values, blob_digest
from savegame.codec.storage import StorageConfig
from savegame.errors import SerializationError
from savegame.model import WORKSPACE_KEY, StoredFile
from tests.codec.chains import (
    PLAIN,
    SECRET,
    Run,
    make_header,
)

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


@pytest.mark.parametrize("floor", [0, 4096])
def test_a_delta_floor_keeps_a_small_state_in_deltas(floor: int) -> None:
    # Without it each delta outgrows the tiny state before it and becomes a keyframe.
    storage = StorageConfig(compress_threshold=0)
    state: dict[str, Any] = {"log": []}
    run = Run(MemoryStore(), storage, state)
    first = run.records[0]
    run.encoder = codec.Encoder(
        storage, base=first, state=state, chain=codec.Chain(0, 0, first.header.size),
        delta_floor=floor,
    )  # fmt: skip
    states = []
    for i in range(10):
        state = {"log": [*state["log"], f"{i} " + "x" * 100]}
        run.write(state, {"log"})
        states.append(state)
    deltas = [r.header.base_id is not None for r in run.records[1:]]
    assert all(deltas) if floor else not all(deltas)
    for i, expected in enumerate(states, start=1):
        assert run.load(i) == expected


class BlobReadCounting(MemoryStore):
    """A real MemoryStore that records which blobs a load reads."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def get_blobs(self, digests: Any) -> dict[str, bytes]:
        self.read.extend(digests)
        return super().get_blobs(digests)


@pytest.mark.parametrize("storage", [PLAIN, SECRET], ids=["plain", "encrypted"])
def test_workspace_files_are_listed_by_their_records_and_never_read_by_a_load(
    storage: StorageConfig,
) -> None:

    store = BlobReadCounting()
    contents = {f"f{i}.txt": f"file {i} ".encode() * 40 for i in range(4)}

    def manifest(files: dict[str, bytes]) -> dict[str, StoredFile]:
        return {p: StoredFile(blob_digest(d, storage), 0o100644, len(d)) for p, d in files.items()}

    run = Run(store, storage, {"n": 0})
    shared = "x" * 500  # a state blob whose content is also a workspace file's
    contents["same.txt"] = shared.encode()
    listed: list[set[str]] = []
    for step in range(1, 6):  # keyframe_every=3: keyframes and deltas both
        if step == 4:
            contents["f1.txt"] = b"changed at step 4"
        state = {"n": step, "doc": shared, WORKSPACE_KEY: manifest(contents)}
        files = {blob_digest(d, storage): d for d in contents.values()}
        header = make_header(run.run_id, step, run.records[-1].checkpoint_id)
        changed = None if step == 1 else ["n", WORKSPACE_KEY]
        encoded = run.encoder.encode(header, state, changed, files)
        blobs = run.encoder.to_upload(store, encoded)
        store.put_checkpoint(encoded.record, lease_token=run.token, blobs=blobs or None)
        run.encoder.committed(store, encoded.record)
        run.records.append(encoded.record)
        listed.append(set(encoded.record.header.blobs))
        store.read.clear()
        loaded = codec.load_state(store, encoded.record, storage).state
        assert loaded == state
        file_blobs = {e.digest for e in state[WORKSPACE_KEY].values()} - {
            blob_digest(shared.encode(), storage)
        }
        assert not file_blobs & set(store.read), step  # the load left the files unread
    keyframe = next(r for r in reversed(run.records) if r.header.base_id is None)
    assert {e.digest for e in manifest(contents).values()} <= set(keyframe.header.blobs)
    # The delta of step 4 lists the one new file (and the patch's refs), no others.
    assert blob_digest(b"changed at step 4", storage) in listed[3]
    assert len(listed[4]) <= 1  # step 5 changed no file: its delta names no new one


# -- by_value: values changed in place after they were encoded (LangGraph's channels) -----
@dataclass
class _Note:  # registered below: a mutable object, as a LangChain message is
    text: str
    tags: list[str]


savegame.register(_Note, name="tests.codec.test_engine._Note")


def _mutate_deep(node: Any, value: Any) -> bool:
    """Change the innermost list or dict under ``node`` in place; False if none."""
    kind = type(node)
    if kind is list:
        for item in node:
            if _mutate_deep(item, value):
                return True
        node.append(value)
        return True
    if kind is dict and all(type(k) is str for k in node):
        for item in node.values():
            if _mutate_deep(item, value):
                return True
        node["q"] = value
        return True
    if kind is set:
        node.add(len(node))
        return True
    if kind is _Note:
        node.tags.append(repr(value)[:8])
        return True
    return False


notes = st.builds(_Note, st.text(max_size=4), st.lists(st.text(max_size=3), max_size=2))
by_value_tree = st.one_of(tree, notes, st.lists(st.one_of(notes, leaf), max_size=4))
by_value_ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "append", "deep", "deep", "same", "drop"]), keys, by_value_tree
    ),
    min_size=1, max_size=12,
)  # fmt: skip
by_value_first = st.dictionaries(
    keys, st.one_of(by_value_tree, st.sets(st.integers(0, 9), max_size=3)), max_size=3
)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=by_value_ops, first=by_value_first)
def test_by_value_every_checkpoint_loads_back_as_it_was_when_encoded(
    name: str, ops: Any, first: dict[str, Any]
) -> None:
    """Every value may be changed in place, at any depth (a set, an item of a packed
    list), after the record holding it was encoded: each record still loads back as
    the state was when it was encoded."""
    storage = CONFIGS[name]
    run = Run(MemoryStore(), storage, first, by_value=True)
    states = [codec.canonical(first)]
    state = first
    for op, key, value in ops:
        if op == "deep" and key in state:
            _mutate_deep(state[key], value)  # the same objects, changed in place
            changed = {key}
        elif op == "append" and type(state.get(key)) is list:
            state[key].append(value)
            changed = {key}
        else:
            state, changed = _step(state, op, key, value)
        run.write(state, changed)
        states.append(codec.canonical(state))
    for i, expected in enumerate(states):
        assert codec.canonical(run.load(i)) == expected, i


def test_a_top_level_set_changed_in_place_is_seen_by_the_default_encoder() -> None:
    """A set is remembered as a copy, as top-level lists and dicts are: LangGraph's
    barrier channels add to the set they stored a step before."""
    seen = {"retriever_two"}
    run = Run(MemoryStore(), PLAIN, {"join": seen})
    seen.add("retriever_one")
    run.write({"join": seen}, {"join"})
    assert run.load()["join"] == {"retriever_one", "retriever_two"}


def test_by_value_packs_see_an_item_changed_in_place_inside_a_closed_chunk() -> None:
    """The default contract keeps a packed item's old value (items match by identity);
    a by_value encoder's packs match by encoding, so the next keyframe repacks it."""
    storage = replace(PLAIN, keyframe_every=2, pack_bytes=256)
    messages = [{"content": f"message {i} " + "words " * 10} for i in range(40)]
    run = Run(MemoryStore(), storage, {"messages": messages}, by_value=True)
    for _ in range(3):
        run.write({"messages": messages}, None)  # keyframes: the chunks close
    messages[3]["content"] = "edited in place"
    run.write({"messages": messages}, None)
    assert run.load()["messages"][3]["content"] == "edited in place"
    messages[5]["content"] = "edited again"
    run.write({"messages": messages}, {"messages"})  # a delta this time
    assert run.load()["messages"][5]["content"] == "edited again"
    assert run.load(-2)["messages"][5]["content"].startswith("message 5")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The _Note objects encoded from now on, in order (under LangGraph's conventions:
    tuples stored as lists, so an item's old tree may be reused, _byvalue)."""
    encoded: list[Any] = []
    real = _values.encode_at

    def counting(value: Any, room: int) -> Any:
        if type(value) is _Note:
            encoded.append(value)
        return real(value, room)

    monkeypatch.setattr(_values, "encode_at", counting)
    with codec.using_conventions(codec.Conventions(tuples_as_lists=True)):
        yield encoded


def test_by_value_a_growing_list_encodes_only_its_new_items_and_sees_edits(
    counted: list[Any],
) -> None:
    """A long list changed at every step (LangGraph's messages) is not encoded whole
    again: the items that are the same objects and print the same keep their trees.
    An item edited in place, at any depth, is encoded again and stored as it is."""
    notes = [_Note(f"note {i}", []) for i in range(30)]
    run = Run(MemoryStore(), replace(PLAIN, keyframe_every=50), {"notes": notes}, by_value=True)
    counted.clear()
    notes.append(_Note("new", []))
    run.write({"notes": notes}, {"notes"})
    assert counted == [notes[-1]]  # only the new item
    counted.clear()
    notes[3].tags.append("edited")  # deep, in place, on an old item
    notes[5].text = "rewritten"
    run.write({"notes": notes}, {"notes"})
    assert len(counted) == len(notes)  # the prefix no longer prints the same: all again
    loaded = run.load()["notes"]
    assert (loaded[3].tags, loaded[5].text) == (["edited"], "rewritten")
    assert run.load(-2)["notes"][3].tags == [] and run.load(-2)["notes"][5].text == "note 5"
    counted.clear()
    notes[7] = _Note("replaced", [])  # a new object in the middle
    notes.append(_Note("last", []))
    run.write({"notes": notes}, {"notes"})
    assert [n.text for n in run.load()["notes"]] == [n.text for n in notes]


def _fresh(run: Run) -> Run:
    """``run`` with an encoder that has written nothing (a new LangGraph line), whose
    deltas may grow long (as a LangGraph line's: ``delta_floor``)."""
    run.encoder = codec.Encoder(run.storage, by_value=True, delta_floor=1 << 30)
    return run


def test_by_value_a_new_encoder_taught_what_another_saw_encodes_only_new_items(
    counted: list[Any],
) -> None:
    """A subgraph's line starts with its parent's messages, the same objects: told what
    the parent's encoder saw (``learn``), it encodes only the items they do not share,
    also when the list comes at its second record (LangGraph's input checkpoint holds
    only ``__start__``), and stores them exactly. Asked to encode whole, it does."""
    storage = replace(PLAIN, keyframe_every=50)
    notes = [_Note(f"note {i}", []) for i in range(30)]
    parent = Run(MemoryStore(), storage, {"notes": notes}, by_value=True)
    notes.append(_Note("parent's", []))
    parent.write({"notes": notes}, {"notes"})
    child = _fresh(Run(MemoryStore(), storage, {}, by_value=True))
    child.encoder.learn(parent.encoder.seen)
    counted.clear()
    child.write({"start": 1}, None)
    mine = [*notes, _Note("child's", [])]
    record = child.write({"start": 1, "notes": mine}, {"notes"})
    assert counted == [mine[-1]] and record.header.base_id is not None  # a delta
    assert [n.text for n in child.load()["notes"]] == [n.text for n in mine]
    counted.clear()
    child.write({"start": 1, "notes": [*mine, _Note("more", [])]}, None)  # whole, asked
    assert len(counted) == len(mine) + 1


def test_by_value_a_taught_list_edited_in_place_is_encoded_again(counted: list[Any]) -> None:
    """What the other encoder saw is checked as its own would be: an item edited in place
    since prints otherwise, and the list is encoded whole and stored as it is now."""
    notes = [_Note(f"note {i}", []) for i in range(10)]
    parent = Run(MemoryStore(), PLAIN, {"notes": notes}, by_value=True)
    notes[4].tags.append("edited")
    child = _fresh(Run(MemoryStore(), PLAIN, {}, by_value=True))
    child.encoder.learn(parent.encoder.seen)
    counted.clear()
    child.write({"notes": notes}, None)
    assert len(counted) == len(notes)
    assert child.load()["notes"][4].tags == ["edited"]


def test_by_value_a_known_list_inside_a_dict_is_not_encoded_again(counted: list[Any]) -> None:
    """A LangGraph subgraph's first checkpoint holds its input, ``{"messages": [...]}``:
    the caller's list, the same objects, under another key and inside a dict. Its items
    keep their trees, the record is what encoding it whole writes, and an item edited
    in place is encoded again."""
    notes = [_Note(f"note {i}", []) for i in range(10)]
    parent = Run(MemoryStore(), PLAIN, {"notes": notes}, by_value=True)
    for edited in (False, True):
        if edited:
            notes[4].tags.append("edited")
        child = _fresh(Run(MemoryStore(), PLAIN, {}, by_value=True))
        child.encoder.learn(parent.encoder.seen)
        counted.clear()
        state = {"input": {"messages": [*notes, _Note("new", [])], "n": 1}}
        record = child.write(state, None)
        assert len(counted) == (len(notes) + 1 if edited else 1), counted
        whole = _fresh(Run(MemoryStore(), PLAIN, {}, by_value=True)).write(state, None)
        assert codec.open_record(record, PLAIN)[1] == codec.open_record(whole, PLAIN)[1]
        assert child.load()["input"]["messages"][4].tags == (["edited"] if edited else [])


def test_by_value_a_known_list_a_level_deeper_is_refused_as_a_whole_encoding_refuses_it() -> None:
    """Inside a dict, a list is a level deeper than the list at the top whose trees it
    reuses: an item that only just fitted there is too deep here. The write is refused as
    a fresh encoder refuses it, not stored to be refused at the next keyframe of the same
    state (found by the session's adversarial review)."""

    def nested(levels: int) -> Any:
        value: Any = 0
        for _ in range(levels):
            value = [value]
        return value

    with codec.using_conventions(codec.Conventions(tuples_as_lists=True)):
        items = [nested(198)]  # fits as an item of a list at the top of the state
        run = Run(MemoryStore(), PLAIN, {"m": items}, by_value=True)
        state = {"m": items, "input": {"messages": items}}
        with pytest.raises(SerializationError) as whole:
            _fresh(Run(MemoryStore(), PLAIN, {}, by_value=True)).write(state, None)
        with pytest.raises(SerializationError) as known:
            run.write(state, {"input"})
        assert str(known.value) == str(whole.value)
        # One level less fits both ways, and loads back.
        items = [nested(197)]
        run = Run(MemoryStore(), PLAIN, {"m": items}, by_value=True)
        state = {"m": items, "input": {"messages": items}}
        run.write(state, {"input"})
        assert run.load() == state
        # The depth, once worked out, is kept up with the items each step adds.
        items = [nested(3)]
        run = Run(MemoryStore(), PLAIN, {"m": items}, by_value=True)
        run.write({"input": {"messages": items}, "m": items}, {"input", "m"})  # worked out
        assert run.encoder.seen["m"].depth[0] >= 0
        items = [*items, nested(198)]
        run.write({"input": {}, "m": items}, {"input", "m"})  # fits at the top
        with pytest.raises(SerializationError):
            run.write({"input": {"messages": items}, "m": items}, {"input"})


def test_by_value_learn_after_a_record_changes_nothing(counted: list[Any]) -> None:
    notes = [_Note(f"note {i}", []) for i in range(10)]
    parent = Run(MemoryStore(), PLAIN, {"notes": notes}, by_value=True)
    other = Run(MemoryStore(), PLAIN, {"x": 1}, by_value=True)
    other.encoder.learn(parent.encoder.seen)  # it has a record already: no
    counted.clear()
    other.write({"x": 1, "notes": notes}, {"notes"})
    assert len(counted) == len(notes)


def test_by_value_lists_loaded_from_the_last_record_are_known_by_the_loaded_objects(
    counted: list[Any],
) -> None:
    """LangGraph decodes the thread's last checkpoint at every invoke and goes on from
    the decoded objects: told so (``loaded``), the encoder reuses its trees for them,
    and encodes only what the turn adds. Untold, or given objects that print otherwise,
    it encodes the list whole."""
    storage = replace(PLAIN, keyframe_every=50)
    notes = [_Note(f"note {i}", []) for i in range(20)]
    run = Run(MemoryStore(), storage, {"notes": notes}, by_value=True)
    notes.append(_Note("second", []))
    run.write({"notes": notes}, {"notes"})
    turn = run.load()
    counted.clear()
    run.write({"notes": [*turn["notes"], _Note("a", [])]}, {"notes"})
    assert len(counted) == len(notes) + 1
    turn = run.load()
    run.encoder.loaded(run.records[-1].checkpoint_id, turn)
    counted.clear()
    run.write({"notes": [*turn["notes"], _Note("b", [])]}, {"notes"})
    assert [n.text for n in counted] == ["b"]
    turn = run.load()
    turn["notes"][2].text = "edited after the load"
    run.encoder.loaded(run.records[-1].checkpoint_id, turn)  # prints otherwise: not taken
    counted.clear()
    run.write({"notes": [*turn["notes"], _Note("c", [])]}, {"notes"})
    assert len(counted) == len(turn["notes"]) + 1
    assert run.load()["notes"][2].text == "edited after the load"
    assert run.load(-2)["notes"][2].text == "note 2"


def test_by_value_a_loaded_list_whose_dicts_come_back_sorted_is_known() -> None:
    """A record's dicts are stored with sorted keys and decode in that order (a chat
    model's ``response_metadata`` does not come sorted): the decoded list still prints
    as the one encoded, and is known by its objects."""
    with codec.using_conventions(codec.Conventions(tuples_as_lists=True)):
        items = [{"model": "m", "finish": "stop", "n": i} for i in range(10)]
        run = Run(MemoryStore(), PLAIN, {"m": items}, by_value=True)
        run.write({"m": [*items, {"z": 1, "a": 2}]}, {"m"})
        turn = run.load()
        assert list(turn["m"][0]) != list(items[0])  # sorted now
        run.encoder.loaded(run.records[-1].checkpoint_id, turn)
        assert run.encoder.seen["m"].items[0] is turn["m"][0]


def test_by_value_a_load_by_another_reader_costs_the_graph_nothing(counted: list[Any]) -> None:
    """Another thread reads the state (a UI's ``get_state``) while the graph goes on from
    its own objects: the encoder still knows those until the next record."""
    notes = [_Note(f"note {i}", []) for i in range(20)]
    run = Run(MemoryStore(), replace(PLAIN, keyframe_every=50), {"notes": notes}, by_value=True)
    notes.append(_Note("second", []))
    run.write({"notes": notes}, {"notes"})
    run.encoder.loaded(run.records[-1].checkpoint_id, run.load())  # the reader's copy
    counted.clear()
    notes.append(_Note("third", []))
    run.write({"notes": notes}, {"notes"})
    assert [n.text for n in counted] == ["third"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(st.one_of(notes, by_value_tree), max_size=8),
    edits=st.lists(st.tuples(st.integers(0, 7), by_value_tree), max_size=3),
    extra=st.lists(by_value_tree, max_size=3),
    refused=st.booleans(),
    key=st.sampled_from([None, "m", "$sg:m", 1]),
    beside=st.dictionaries(st.text(max_size=3), by_value_tree, max_size=2),
)
def test_a_list_value_encoded_with_what_an_encoder_saw_is_the_same_bytes(
    items: list[Any],
    edits: Any,
    extra: list[Any],
    refused: bool,
    key: str | int | None,
    beside: dict[str, Any],
) -> None:
    """A LangGraph write of a channel's list is encoded with what the line's encoder saw
    of it (``encode_value(seen=...)``): the same bytes as without, whatever was edited in
    place or added since, and the same refusal for what cannot be saved. So is a dict
    holding the list under ``key`` (a subgraph's input) with ``seen`` by key, including
    the dicts written otherwise (one tag-like key, a key not a str)."""
    with codec.using_conventions(codec.Conventions(tuples_as_lists=True)):
        run = Run(MemoryStore(), PLAIN, {"m": items}, by_value=True)
        seen: Any = run.encoder.seen.get("m")
        for index, value in edits:
            if items:
                _mutate_deep(items[index % len(items)], value)
        value: Any = [*items, *extra, *([object()] if refused else [])]
        if key is not None and seen is not None:
            value = {**({} if key == "$sg:m" else beside), key: value}
            seen = {key: seen} if type(key) is str else {"m": seen}
        if not refused:
            assert codec.encode_value(value, "w", seen=seen) == codec.encode_value(value, "w")
            return
        with pytest.raises(SerializationError) as alone:
            codec.encode_value(value, "w")
        with pytest.raises(SerializationError) as helped:
            codec.encode_value(value, "w", seen=seen)
        assert str(helped.value) == str(alone.value)


def test_by_value_a_list_orjson_cannot_fingerprint_is_still_exact() -> None:
    """Non-string keys and slotted objects make no fingerprint: encoded whole each step."""
    items: list[Any] = [{1: "a"}, collections.deque([1, 2])]
    run = Run(MemoryStore(), PLAIN, {"items": items}, by_value=True)
    items[0][1] = "b"
    items[1].append(3)
    run.write({"items": items}, {"items"})
    assert run.load()["items"] == [{1: "b"}, collections.deque([1, 2, 3])]
    assert run.load(0)["items"] == [{1: "a"}, collections.deque([1, 2])]


@pytest.mark.parametrize(
    ("old", "new"),
    [(0.0, -0.0), (1, True), (True, 1), (1, 1.0), ("a", "b"), (2**40, 2**40 + 1), (None, 0)],
)
def test_diff_trees_sends_a_leaf_again_exactly_when_its_json_changed(old: Any, new: Any) -> None:
    """Leaves equal in Python but written differently (``0.0 == -0.0``, ``1 == True``)
    are sent again, at the top level and inside a patched dict."""
    from savegame.codec import _delta

    assert _delta.diff_trees({"k": old}, {"k": new}, {"k"}) == {"s": [["k", new]]}
    patch = _delta.diff_trees({"k": {"v": old, "w": 1}}, {"k": {"v": new, "w": 1}}, {"k"})
    assert patch == {"p": [["k", {"s": [["v", new]]}]]}
    # A dict inside a patched dict (skipped whole when its JSON is the old one's).
    patch = _delta.diff_trees(
        {"k": {"d": {"v": old}, "e": {"v": 1}}}, {"k": {"d": {"v": new}, "e": {"v": 1}}}, {"k"}
    )
    assert patch == {"p": [["k", {"p": [["d", {"s": [["v", new]]}]]}]]}


def test_diff_trees_skips_equal_leaves_that_are_other_objects() -> None:
    from savegame.codec import _delta

    def tree() -> dict[str, Any]:
        text = "".join(["version ", str(10**12)])  # a new str object each time
        return {"k": {"s": text, "n": int(text[8:]), "b": False, "d": {"e": [text]}}}

    old, new = tree(), tree()
    assert old["k"]["s"] is not new["k"]["s"]
    assert _delta.diff_trees(old, new, {"k"}) == {}

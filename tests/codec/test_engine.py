"""The encoder: keyframes and deltas, whatever the sequence of updates, load back equal and stay small."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from savegame import MemoryStore, codec
from savegame.codec.storage import StorageConfig
from tests.codec.chains import (
    PLAIN,
    SECRET,
    Run,
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

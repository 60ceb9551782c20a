"""Blobs: large values stored once, sent only when missing, and checked by name on every read."""

from __future__ import annotations

from dataclasses import replace

import pytest
import zstandard

from savegame import MemoryStore
from savegame.codec import (
    _blobs,
    _engine,
)
from savegame.errors import (
    CorruptRecordError,
)
from tests.codec.chains import (
    PLAIN,
    AskCounting,
    Run,
    make_header,
)


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
    assert two.load()["doc"] == doc


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
    header = make_header(two.run_id, 1, two.records[-1].checkpoint_id)
    encoded = two.encoder.encode(header, {"x": 2, "msg": small}, {"msg"})
    assert set(two.encoder.to_upload(store, encoded)) == set(encoded.blobs)
    assert store.asked == 1
    encoded = two.encoder.encode(header, {"x": 2, "doc": large}, {"doc"})
    assert two.encoder.to_upload(store, encoded) == {}
    assert store.asked == 2
    two.write({"x": 2, "msg": small, "doc": large}, {"msg", "doc"})
    assert store.stats().blobs == 2
    assert two.load() == {"x": 2, "msg": small, "doc": large}


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

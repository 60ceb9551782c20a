"""Long lists in keyframes as packs: runs of items stored once, as one blob each.

An agent's state is mostly a few lists that only grow (messages, tool
results). A keyframe that wrote every item again would make storage
quadratic; one blob per item made a load slow (one row, one zstd frame and
one check per item: 2,000 messages cost 7 ms in zstd frames alone). So a
keyframe cuts each long list into chunks of about ``StorageConfig.pack_bytes``
of encoded items, and each chunk's pack (its items as one JSON array,
content-addressed like any blob) is written once. The items after the last
closed chunk (the tail) stay inline in the keyframe.

Where a chunk ends depends on the item that ends it (content-defined, as in
rsync or restic, at item granularity): after each item, a hash of its
encoding decides, with a chance proportional to its size, once the chunk holds
a quarter of ``pack_bytes``; at four times ``pack_bytes`` it ends anyway. So a
list that grows at its end keeps its chunks, and an item edited, inserted or
removed in the middle changes the chunk around it, not every chunk after it.

In a keyframe's tree such a list is ``{"$sg:pack": [[digest, ...], [tail item, ...],
[digest of a pack holding tags, ...]]}`` (such records carry format version 3). The
last list names the packs a load must walk (blob references, tagged values): the
others are plain JSON, and searching 4 MB of text for tags cost as much as parsing
it. Lists reached from the state through dicts with plain string keys are packed;
a list inside a list is not (it goes whole into its parent's pack).

Items are compared by identity to find the chunks that are already packed, as
the deltas do: a step replaces an item rather than mutating it in place (the
documented contract), so an item mutated in place inside a closed chunk keeps
its packed value.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import is_
from typing import Any

import orjson

from savegame.codec import blobs, values
from savegame.codec.storage import StorageConfig
from savegame.errors import SerializationError

TAG = blobs.PACK
_ESCAPE = "$sg:"


@dataclass(frozen=True, slots=True)
class Deferred:
    """A blob the keyframe refers to whose bytes are only built if the store lacks it."""

    size: int
    build: Callable[[], bytes]


@dataclass(slots=True, eq=False)  # compared by identity: its items may be large
class _Chunk:
    start: int
    items: tuple[Any, ...]
    """The state's own item objects: a later keyframe reuses the chunk if they are still there."""
    digest: str
    size: int
    loose: dict[str, int]
    """Blobs inside the pack (strings above the inline limit), by name, with their sizes."""
    path: str
    tagged: bool
    """Whether its items hold tags (a load then walks them)."""
    stored: int
    """Bytes of the pack as stored (sealed)."""
    sealed: bytes | None = None
    """The pack as stored, until a keyframe referring to it is committed."""
    blobs: dict[str, bytes] = field(default_factory=dict)
    """The loose blobs' bytes, for as long as ``sealed`` is kept."""

    @property
    def end(self) -> int:
        return self.start + len(self.items)


@dataclass(slots=True)
class Packed:
    """What a keyframe needs besides its tree."""

    found: dict[str, bytes] = field(default_factory=dict)
    """Blobs whose plaintext is at hand (loose values)."""
    sealed: dict[str, bytes] = field(default_factory=dict)
    """New packs, already sealed (compressed once, when the chunk closed)."""
    deferred: dict[str, Deferred] = field(default_factory=dict)
    """Blobs already committed once by this encoder: rebuilt only if a store lacks them."""
    pack_bytes: int = 0
    """Stored bytes of the packs referred to (loose values inside them at their plaintext
    size): with the keyframe and ``found``, a full copy of the state."""
    used: bool = False
    """Whether the tree holds a pack (the record then needs format version 3)."""


def enabled(storage: StorageConfig) -> bool:
    # Packs are blobs: turning blobs off turns packs off too.
    return storage.pack_bytes > 0 and storage.blob_threshold > 0


def _plain_dict(node: dict[Any, Any]) -> bool:
    """A dict that ``values.to_data`` keeps as a JSON object of the same keys."""
    if not all(type(key) is str for key in node):
        return False
    return not (len(node) == 1 and next(iter(node)).startswith(_ESCAPE))


def _same(chunk_items: tuple[Any, ...], items: list[Any], start: int) -> bool:
    """Whether ``items`` holds exactly these objects from ``start`` on."""
    end = start + len(chunk_items)
    return end <= len(items) and all(map(is_, chunk_items, items[start:end]))


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


class Packer:
    """The closed chunks of one run's lists, kept between the keyframes of one encoder."""

    def __init__(self, storage: StorageConfig) -> None:
        self.storage = storage
        self._lists: dict[tuple[str, ...], list[_Chunk]] = {}
        # committed() runs on the background writer's thread with durability="async";
        # it only records names here, and the run's thread applies them in tree().
        self._lock = threading.Lock()
        self._stored: set[str] = set()

    def tree(self, state: dict[str, Any], out: Packed) -> Any:
        """The keyframe tree of ``state``: ``values.to_data`` and blob extraction, lists packed.

        Raises:
            SerializationError: naming the path of the first value that is not pure data.
        """
        with self._lock:
            stored, self._stored = self._stored, set()
        if stored:
            self._drop_sealed(stored)
        if not _plain_dict(state):
            self._lists.clear()
            return blobs.extract(values.to_data(state, "state"), self.storage, out.found)
        seen: set[tuple[str, ...]] = set()
        tree = self._dict(state, "state", (), out, seen)
        for gone in [key for key in self._lists if key not in seen]:
            del self._lists[gone]
        return tree

    def committed(self, names: Iterable[str]) -> None:
        """A keyframe referring to these blobs is durable: its packs' bytes can go.

        Safe from another thread: the bytes are dropped by the next :meth:`tree`.
        """
        with self._lock:
            self._stored.update(names)

    def _drop_sealed(self, stored: set[str]) -> None:
        for chunks in self._lists.values():
            for chunk in chunks:
                if chunk.sealed is not None and chunk.digest in stored:
                    chunk.sealed, chunk.blobs = None, {}

    def _dict(
        self,
        node: dict[str, Any],
        path: str,
        key: tuple[str, ...],
        out: Packed,
        seen: set[tuple[str, ...]],
    ) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for name, value in node.items():
            where = _child(path, name)
            kind = type(value)
            if kind is list:
                seen.add((*key, name))
                tree[name] = self._list(value, where, (*key, name), out)
            elif kind is dict and _plain_dict(value):
                tree[name] = self._dict(value, where, (*key, name), out, seen)
            else:
                tree[name] = blobs.extract(values.to_data(value, where), self.storage, out.found)
        return tree

    def _list(self, items: list[Any], path: str, key: tuple[str, ...], out: Packed) -> Any:
        cached = self._lists.get(key, [])
        # Cached chunks by their first item: after an edit the cuts fall where they fell
        # before, and from there on the chunks are the same objects again.
        by_first = {id(chunk.items[0]): chunk for chunk in cached}
        chunks: list[_Chunk] = []
        limit = self.storage.inline_max
        tail: list[Any] = []
        encoded: list[bytes] = []
        loose: dict[str, bytes] = {}
        size = 0
        index = 0
        while index < len(items):
            if not tail:
                reused = by_first.get(id(items[index]))
                if reused is not None and _same(reused.items, items, index):
                    reused.start = index
                    chunks.append(reused)
                    index = reused.end
                    continue
            found: dict[str, bytes] = {}
            item = blobs.extract(
                values.to_data(items[index], f"{path}[{index}]"), self.storage, found, limit
            )
            tail.append(item)
            encoded.append(orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
            loose.update(found)
            size += len(encoded[-1]) + 1
            index += 1
            if self._cut_after(encoded[-1], size):
                first = index - len(tail)
                chunks.append(self._close(path, first, items[first:index], encoded, loose))
                tail, encoded, loose, size = [], [], {}, 0
        out.found.update(loose)
        self._lists[key] = chunks
        if not chunks:
            return tail
        for chunk in chunks:
            self._refer(chunk, out)
        out.used = True
        names = [chunk.digest for chunk in chunks]
        return {TAG: [names, tail, [chunk.digest for chunk in chunks if chunk.tagged]]}

    def _cut_after(self, encoded: bytes, size: int) -> bool:
        """Whether the chunk ends after this item (``size``: the chunk's bytes with it)."""
        target = self.storage.pack_bytes
        least = target // 4
        if size < least:
            return False
        if size >= target * 4:
            return True
        # Past the first quarter, a chance of len / (3/4 target) per item: chunks of
        # about ``target`` bytes on average.
        return zlib.crc32(encoded) < (len(encoded) + 1) * (1 << 32) // (target - least)

    def _close(
        self,
        path: str,
        start: int,
        items: list[Any],
        encoded: list[bytes],
        loose: dict[str, bytes],
    ) -> _Chunk:
        plain = b"[" + b",".join(encoded) + b"]"
        digest = blobs.digest(plain, self.storage)
        sealed = blobs.seal(digest, plain, self.storage)
        return _Chunk(
            start=start,
            items=tuple(items),
            digest=digest,
            size=len(plain),
            loose={name: len(data) for name, data in loose.items()},
            path=path,
            tagged=any(b'"$sg:' in item for item in encoded),
            stored=len(sealed),
            sealed=sealed,
            blobs=dict(loose),
        )

    def _refer(self, chunk: _Chunk, out: Packed) -> None:
        out.pack_bytes += chunk.stored
        sealed = chunk.sealed
        if sealed is not None:
            out.sealed[chunk.digest] = sealed
            out.found.update(chunk.blobs)
            return
        # Loose blobs in ``found`` are counted by the encoder; these are not there.
        out.pack_bytes += sum(chunk.loose.values())
        out.deferred[chunk.digest] = Deferred(chunk.size, lambda: self._rebuild(chunk)[0])
        for name, size in chunk.loose.items():
            out.deferred[name] = Deferred(size, self._loose_builder(chunk, name))

    def _loose_builder(self, chunk: _Chunk, name: str) -> Callable[[], bytes]:
        return lambda: self._rebuild(chunk)[1][name]

    def _rebuild(self, chunk: _Chunk) -> tuple[bytes, dict[str, bytes]]:
        """A committed chunk's bytes again (a store that lost them, e.g. after a prune).

        Raises:
            SerializationError: the items no longer encode to the pack's content (one
                was mutated in place after it was packed); nothing is sent under the
                pack's name, and the chunk is packed again by the next keyframe.
        """
        found: dict[str, bytes] = {}
        encoded = [
            orjson.dumps(
                blobs.extract(
                    values.to_data(item, f"{chunk.path}[{chunk.start + i}]"),
                    self.storage,
                    found,
                    self.storage.inline_max,
                ),
                option=orjson.OPT_SORT_KEYS,
            )
            for i, item in enumerate(chunk.items)
        ]
        plain = b"[" + b",".join(encoded) + b"]"
        if blobs.digest(plain, self.storage) != chunk.digest:
            for chunks in self._lists.values():
                chunks[:] = [c for c in chunks if c is not chunk]
            raise SerializationError(
                f"{chunk.path}[{chunk.start}:{chunk.end}]",
                "an item was changed in place after it was stored in a pack; "
                "replace items (a new list with a new item) instead of mutating them",
            )
        return plain, found

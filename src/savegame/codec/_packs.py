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

A dict below the state that holds many entries (``{call_id: result}``) is packed
the same way, in insertion order, its entries as ``[key, value]`` pairs:
``{"$sg:dpack": [[digest, ...], {other entries}, [tagged digests]]}``. A list or
dict value over ``inline_max`` is walked into instead of packed whole, so a
conversation kept per id is packed inside rather than rewritten at every keyframe.

Items are compared by identity to find the chunks that are already packed, as
the deltas do: a step replaces an item rather than mutating it in place (the
documented contract), so an item mutated in place inside a closed chunk keeps
its packed value. An encoder made ``by_value`` (LangGraph's, whose channels change in
place) hands the packer encoded trees instead, and chunks match by encoding.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any

import orjson

from savegame.codec import _blobs, _refs, _values
from savegame.codec.storage import StorageConfig
from savegame.errors import SerializationError

TAG = _refs.PACK
DICT_TAG = _refs.DICT_PACK


@dataclass(frozen=True, slots=True)
class Deferred:
    """A blob the keyframe refers to whose bytes are only built if the store lacks it."""

    size: int
    build: Callable[[], bytes]


@dataclass(slots=True, eq=False)  # compared by identity: its items may be large
class _Chunk:
    start: int
    names: tuple[str, ...] | None
    """A dict's chunk: its keys, in insertion order (None for a list's chunk)."""
    items: tuple[Any, ...]
    """The state's own objects: a later keyframe reuses the chunk if they are still there."""
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
    rebuilders: dict[str, Deferred] | None = None
    """Once committed: how to build the pack and its loose blobs again, made once for
    every keyframe after (a long list's keyframe refers to hundreds of chunks)."""

    @property
    def end(self) -> int:
        return self.start + len(self.items)

    def where(self, index: int) -> str:
        """The path of the chunk's ``index``-th item, for errors."""
        if self.names is None:
            return f"{self.path}[{self.start + index}]"
        return _child(self.path, self.names[index])


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


def enabled(storage: StorageConfig) -> bool:
    # Packs are blobs: turning blobs off turns packs off too.
    return storage.pack_bytes > 0 and storage.blob_threshold > 0


def _exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` holds roughly more than ``limit`` bytes of data; stops early.

    An estimate (string lengths, a few bytes per other leaf), cheap and the same for
    equal values, so whether a dict entry is packed whole does not flicker.
    """
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str or kind is bytes:
            total += len(node) + 2
        elif kind is list or kind is tuple:
            stack.extend(node)
            total += 2
        elif kind is dict:
            for key, item in node.items():
                total += len(key) + 4 if type(key) is str else 8
                stack.append(item)
        else:
            total += 8
        if total > limit:
            return True
    return False


def _container(value: Any) -> bool:
    """A value the packer walks into rather than encoding whole."""
    kind = type(value)
    return kind is list or (kind is dict and _values.plain_dict(value))


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


class Packer:
    """The closed chunks of one run's lists and dicts, kept between the keyframes of one encoder."""

    def __init__(self, storage: StorageConfig, *, trees: bool = False) -> None:
        """``trees``: :meth:`tree` is given the state already encoded (``_values.encode_at``),
        as a ``by_value`` encoder does; chunks then match items by their encoding, not by
        identity, so an item changed in place is packed again."""
        self.storage = storage
        self._trees = trees
        self._lists: dict[tuple[str, ...], list[_Chunk]] = {}
        self._dicts: dict[tuple[str, ...], list[_Chunk]] = {}
        # committed() runs on the background writer's thread with durability="async";
        # it only records names here, and the run's thread applies them in tree().
        self._lock = threading.Lock()
        self._stored: set[str] = set()

    def tree(self, state: dict[str, Any], out: Packed) -> Any:
        """The keyframe tree of ``state``: ``_values.to_data`` and blob extraction, lists
        and nested dicts packed.

        Raises:
            _values.Unsaveable: a value is not pure data (without its path:
                ``Encoder.encode`` names it), or orjson's error for a lone surrogate.
        """
        with self._lock:
            stored, self._stored = self._stored, set()
        if stored:
            self._drop_sealed(stored)
        if not _values.plain_dict(state):
            self._lists.clear()
            self._dicts.clear()
            return _refs.extract(
                _values.encode_at(state, _values.MAX_DEPTH), self.storage, out.found
            )
        if self._trees and 2 * len(orjson.dumps(state)) < self.storage.pack_bytes // 4:
            # No chunk closes below a quarter of ``pack_bytes`` (_cut_after), and a chunk
            # holds at most 1.4x the JSON of its entries (a dict's "k":v, as [k,v] and a
            # comma): in a state this small nothing is packed and no cached chunk can
            # match. The same tree without the chunking walk: a LangGraph thread's first
            # keyframe, every thread.
            self._lists.clear()
            self._dicts.clear()
            return self._unpacked(state, (), out)
        seen: set[tuple[str, ...]] = set()
        tree = self._dict(state, "state", (), out, seen)
        for cache in (self._lists, self._dicts):
            for gone in [key for key in cache if key not in seen]:
                del cache[gone]
        return tree

    def _unpacked(self, node: dict[str, Any], key: tuple[str, ...], out: Packed) -> Any:
        """:meth:`_dict`'s tree of ``node`` (encoded) when nothing in it is packed: a list
        is its items (strings over ``inline_max`` as blobs, as in a pack's tail), any other
        leaf as :meth:`_value` has it (over ``blob_threshold``)."""
        tree: dict[str, Any] = {}
        for name, value in node.items():
            inner = (*key, name)
            if len(inner) <= _values.LAYOUT_DEPTH:
                if type(value) is list:
                    tree[name] = _refs.extract(
                        value, self.storage, out.found, limit=self.storage.inline_max
                    )
                    continue
                if type(value) is dict and _values.plain_dict(value):
                    tree[name] = self._unpacked(value, inner, out)
                    continue
            tree[name] = _refs.extract(value, self.storage, out.found)
        return tree

    def committed(self, names: Iterable[str]) -> None:
        """A keyframe referring to these blobs is durable: its packs' bytes can go.

        Safe from another thread: the bytes are dropped by the next :meth:`tree`.
        """
        with self._lock:
            self._stored.update(names)

    def _all_chunks(self) -> Iterator[list[_Chunk]]:
        yield from self._lists.values()
        yield from self._dicts.values()

    def _drop_sealed(self, stored: set[str]) -> None:
        for chunks in self._all_chunks():
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
    ) -> Any:
        if key:  # the state itself keeps its shape; dicts below it may be packed
            packed = self._packed_dict(node, path, key, out, seen)
            if packed is not None:
                return packed
        tree: dict[str, Any] = {}
        for name, value in node.items():
            tree[name] = self._value(value, _child(path, name), (*key, name), out, seen)
        return tree

    def _value(
        self, value: Any, where: str, key: tuple[str, ...], out: Packed, seen: set[tuple[str, ...]]
    ) -> Any:
        # ``len(key)``: the containers around ``value`` in the state's tree. Each pack
        # nests its items 2 deeper, so packing stops at LAYOUT_DEPTH (_values.MAX_DEPTH).
        if len(key) <= _values.LAYOUT_DEPTH:
            if type(value) is list:
                seen.add(key)
                return self._list(value, where, key, out)
            if type(value) is dict and _values.plain_dict(value):
                return self._dict(value, where, key, out, seen)
        if not self._trees:
            value = _values.encode_at(value, _values.MAX_DEPTH - len(key))
        return _refs.extract(value, self.storage, out.found)

    def _list(self, items: list[Any], path: str, key: tuple[str, ...], out: Packed) -> Any:
        chunks, tail = self._chunked(
            items, path, len(key) + 1, self._lists.get(key, []), out, names=None
        )
        self._lists[key] = chunks
        if not chunks:
            return [tree for _, tree in tail]
        return {TAG: self._refer_all(chunks, [tree for _, tree in tail], out)}

    def _packed_dict(
        self,
        node: dict[str, Any],
        path: str,
        key: tuple[str, ...],
        out: Packed,
        seen: set[tuple[str, ...]],
    ) -> Any | None:
        """A dict with many entries as packs of them, or None.

        Entries are packed whole, as list items are, except a list or dict value too
        large to rewrite whenever it changes (over ``inline_max``, roughly): the packer
        walks into it as into any other, so a conversation kept per id is packed
        inside, not stored again whole at every keyframe.
        """
        limit = self.storage.inline_max
        walked = [
            name for name, value in node.items() if _container(value) and _exceeds(value, limit)
        ]
        leaves = [(name, value) for name, value in node.items() if name not in walked]
        if len(leaves) < 2:
            self._dicts.pop(key, None)
            return None
        seen.add(key)
        names = [name for name, _ in leaves]
        chunks, tail = self._chunked(
            [value for _, value in leaves],
            path,
            len(key) + 1,
            self._dicts.get(key, []),
            out,
            names=names,
        )
        self._dicts[key] = chunks
        if not chunks:
            return None
        rest: dict[str, Any] = {}
        for name, tree in tail:
            assert name is not None  # a dict's entries all have keys
            rest[name] = tree
        for name in walked:
            rest[name] = self._value(node[name], _child(path, name), (*key, name), out, seen)
        return {DICT_TAG: self._refer_all(chunks, rest, out)}

    def _refer_all(self, chunks: list[_Chunk], tail: Any, out: Packed) -> list[Any]:
        for chunk in chunks:
            self._refer(chunk, out)
        names = [chunk.digest for chunk in chunks]
        return [names, tail, [chunk.digest for chunk in chunks if chunk.tagged]]

    def _chunked(
        self,
        items: list[Any],
        path: str,
        depth: int,
        cached: list[_Chunk],
        out: Packed,
        *,
        names: list[str] | None,
    ) -> tuple[list[_Chunk], list[tuple[str | None, Any]]]:
        """Chunks over ``items`` (a dict's values when ``names`` are its keys), reusing
        ``cached`` ones that still match, and the tail (name, tree) after the last one.
        ``depth``: the containers around each item in the state's tree."""
        room = _values.MAX_DEPTH - depth
        # Cached chunks by their first entry: after an edit the cuts fall where they fell
        # before, and from there on the chunks are the same objects again.
        by_first: dict[Any, _Chunk] = {
            (chunk.names[0] if chunk.names is not None else self._first(chunk.items[0])): chunk
            for chunk in cached
        }
        chunks: list[_Chunk] = []
        limit = self.storage.inline_max
        tail: list[tuple[str | None, Any]] = []
        encoded: list[bytes] = []
        loose: dict[str, bytes] = {}
        size = 0
        index = 0
        while index < len(items):
            if not tail:
                first = names[index] if names is not None else self._first(items[index])
                reused = by_first.get(first)
                if reused is not None and self._matches(reused, names, items, index):
                    reused.start = index
                    chunks.append(reused)
                    index = reused.end
                    continue
            name = names[index] if names is not None else None
            tree = items[index] if self._trees else _values.encode_at(items[index], room)
            entry = _encode(name, tree)
            # No leaf of an entry this short outgrows the limit, and the walk looks for
            # no workspace file here (they are in the manifest, never packed): it would
            # copy the tree unchanged, tags and all (12.7k instructions a 2 KB message;
            # every LangChain message has a tag). Otherwise the walk, and the entry
            # encoded again from what it gives.
            if len(entry) > limit:
                found: dict[str, bytes] = {}
                tree = _refs.extract(tree, self.storage, found, limit=limit)
                entry = _encode(name, tree)
                loose.update(found)
            tail.append((name, tree))
            encoded.append(entry)
            size += len(entry) + 1
            index += 1
            if self._cut_after(encoded[-1], size):
                begin = index - len(tail)
                chunks.append(
                    self._close(
                        path,
                        begin,
                        None if names is None else tuple(names[begin:index]),
                        items[begin:index],
                        encoded,
                        loose,
                    )
                )
                tail, encoded, loose, size = [], [], {}, 0
        out.found.update(loose)
        return chunks, tail

    def _first(self, item: Any) -> Any:
        """What finds a list's cached chunk by its first item: the item itself (by
        identity), or with ``trees`` its encoding."""
        return orjson.dumps(item) if self._trees else id(item)

    def _matches(
        self, chunk: _Chunk, names: Sequence[str] | None, items: Sequence[Any], start: int
    ) -> bool:
        """Whether the entries from ``start`` on are exactly the chunk's: the same keys,
        and the same objects (with ``trees``, the same encoding)."""
        end = start + len(chunk.items)
        if end > len(items):
            return False
        if self._trees:
            if orjson.dumps(items[start:end]) != orjson.dumps(chunk.items):
                return False
        elif not all(map(is_, chunk.items, items[start:end])):
            return False
        return names is None or tuple(names[start:end]) == chunk.names

    def _cut_after(self, encoded: bytes, size: int) -> bool:
        """Whether the chunk ends after this entry (``size``: the chunk's bytes with it)."""
        target = self.storage.pack_bytes
        least = target // 4
        if size < least:
            return False
        if size >= target * 4:
            return True
        # Past the first quarter, a chance of len / (3/4 target) per entry: chunks of
        # about ``target`` bytes on average.
        return zlib.crc32(encoded) < (len(encoded) + 1) * (1 << 32) // (target - least)

    def _close(
        self,
        path: str,
        start: int,
        names: tuple[str, ...] | None,
        items: list[Any],
        encoded: list[bytes],
        loose: dict[str, bytes],
    ) -> _Chunk:
        plain = b"[" + b",".join(encoded) + b"]"
        digest = _blobs.blob_digest(plain, self.storage)
        sealed = _blobs.seal_blob(digest, plain, self.storage)
        # A tag in any entry is one in ``plain`` (no tag spans the commas between them).
        # A lone "$" is found by memchr; the tag's own search steps through JSON's every
        # quote and letter (5.7k instructions a 2 KB message).
        tagged = b"$" in plain and b'"$sg:' in plain
        return _Chunk(
            start=start,
            names=names,
            items=tuple(items),
            digest=digest,
            size=len(plain),
            loose={name: len(data) for name, data in loose.items()},
            path=path,
            tagged=tagged,
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
        if chunk.rebuilders is None:
            chunk.rebuilders = {chunk.digest: Deferred(chunk.size, lambda: self._rebuild(chunk)[0])}
            for name, size in chunk.loose.items():
                chunk.rebuilders[name] = Deferred(size, self._loose_builder(chunk, name))
        out.deferred.update(chunk.rebuilders)

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
        encoded = []
        plain = b""
        try:
            for i, item in enumerate(chunk.items):
                tree = _refs.extract(
                    item if self._trees else _values.to_data(item, chunk.where(i)),
                    self.storage,
                    found,
                    limit=self.storage.inline_max,
                )
                encoded.append(_encode(None if chunk.names is None else chunk.names[i], tree))
            plain = b"[" + b",".join(encoded) + b"]"
        except (orjson.JSONEncodeError, UnicodeEncodeError):
            pass  # it encoded when it was packed: changed in place since, as below
        if not plain or _blobs.blob_digest(plain, self.storage) != chunk.digest:
            for chunks in self._all_chunks():
                chunks[:] = [c for c in chunks if c is not chunk]
            raise SerializationError(
                f"{chunk.path}[{chunk.start}:{chunk.end}]",
                "an item was changed in place after it was stored in a pack; "
                "replace items (a new list with a new item) instead of mutating them",
            )
        return plain, found


def _encode(name: str | None, tree: Any) -> bytes:
    """A list item as itself; a dict entry as ``[key, value]``."""
    return orjson.dumps(tree if name is None else [name, tree], option=orjson.OPT_SORT_KEYS)

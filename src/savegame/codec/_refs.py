"""Blob references in a state's tree: put in, resolved, renamed.

After ``_values.to_data``, every string longer than ``blob_threshold`` characters
and every ``bytes`` value longer than ``blob_threshold`` bytes is replaced in the
tree by ``{"$sg:blob": ["s"|"b", digest]}`` and its bytes go to the store's blob
table under ``digest`` (:mod:`savegame.codec._blobs` names and seals them).
``resolve`` puts them back before ``_values.revive``, so every other part of
the codec sees ordinary trees. A keyframe's packs (:mod:`savegame.codec._packs`)
are references too: ``{"$sg:pack": ...}`` and ``{"$sg:dpack": ...}``.

Two walks read those references: :class:`_Resolver` for a load and :class:`Renamer`
for ``rekey``. They must agree on every kind of reference, so they live together.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from savegame.codec._blobs import blob_digest, seal_blob
from savegame.codec.storage import StorageConfig
from savegame.errors import CorruptRecordError

TAG = "$sg:blob"
PACK = "$sg:pack"
"""A packed list (:mod:`savegame.codec._packs`): ``{PACK: [packs, tail items, tagged packs]}``."""
DICT_PACK = "$sg:dpack"
"""A packed dict: ``{DICT_PACK: [packs of [key, value] pairs, the other entries, tagged packs]}``."""
FILE = "f"
"""The kind of a workspace file's reference: ``{TAG: ["f", digest, mode, size]}``."""
_BYTES = "$sg:bytes"
_ESCAPED = "$sg:dict"


def extract(
    tree: Any,
    storage: StorageConfig,
    found: dict[str, bytes],
    *,
    limit: int | None = None,
    files: set[str] | None = None,
) -> Any:
    """``tree`` with leaves longer than ``limit`` (default: ``storage.blob_threshold``)
    replaced by blob references; their bytes are added to ``found``, and the names of
    the workspace files it refers to (already references) to ``files``."""
    if limit is None or storage.blob_threshold <= 0:
        limit = storage.blob_threshold
    if limit <= 0:
        limit = 1 << 62  # no blobs, but workspace files are still found
    return _Extractor(storage, found, limit, files).walk(tree)


#: The key of a blob reference as it reads in a body: no body without it names a file.
TAG_BYTES = b'"$sg:blob"'
#: A workspace file's reference as it starts in a canonical body: none without it.
FILE_BYTES = b'"$sg:blob":["f",'


def files_in(tree: Any, storage: StorageConfig) -> set[str]:
    """The workspace files an encoded tree (a keyframe's or a patch's) refers to.

    A walk, not a pattern: a user's dict with the key ``$sg:blob`` is escaped data,
    and must not make its record list (and an export carry) a blob it names."""
    files: set[str] = set()
    _Extractor(storage, {}, 1 << 62, files).walk(tree)
    return files


class _Extractor:
    """One extract's walk, a class for the reason :class:`_Resolver` gives: a
    self-calling closure is a reference cycle, garbage for the collector on every step."""

    __slots__ = ("files", "found", "limit", "storage")

    def __init__(
        self, storage: StorageConfig, found: dict[str, bytes], limit: int, files: set[str] | None
    ) -> None:
        self.storage, self.found, self.limit, self.files = storage, found, limit, files

    def walk(self, node: Any) -> Any:
        kind = type(node)
        if kind is str:
            if len(node) <= self.limit:
                return node
            return self.ref("s", node.encode())
        if kind is list:
            return [self.walk(item) for item in node]
        if kind is not dict:
            return node
        if len(node) == 1:
            ((key, body),) = node.items()
            if key == _BYTES and len(body) > self.limit * 4 // 3:
                raw = base64.b64decode(body)
                if len(raw) > self.limit:
                    return self.ref("b", raw)
                return node
            if key == _ESCAPED:
                # An escaped user dict: its keys are data, only its values are walked.
                return {key: {k: self.walk(v) for k, v in body.items()}}
            if key == TAG:  # user dicts are escaped: only a workspace file's reference
                if self.files is not None:
                    self.files.add(body[1])
                return node
        return {k: self.walk(v) for k, v in node.items()}

    def ref(self, kind: str, data: bytes) -> dict[str, Any]:
        name = blob_digest(data, self.storage)
        self.found[name] = data
        return {TAG: [kind, name]}


_STRING_BLOB = b'{"$sg:blob":["s",'
_PACKED = b'{"$sg:pack":'
_DICT_PACKED = b'{"$sg:dpack":'
_PACK_KEY = b'"$sg:pack"'
_DICT_PACK_KEY = b'"$sg:dpack"'


def has_references(body: bytes) -> bool:
    """Whether a JSON body may hold a blob reference or a pack, which :func:`resolve`
    replaces. The body is canonical orjson, where such a key's quotes are bare and a
    string's are escaped, so a miss is exact (a hit may be text that looks like one)."""
    return TAG_BYTES in body or _PACK_KEY in body or _DICT_PACK_KEY in body


def needs_revival(body: bytes) -> bool:
    """Whether a JSON body holds tags other than string blob references and packs.

    Those are plain strings and lists once resolved, so a state made of text
    (the usual agent state: messages) skips ``_values.revive``'s walk. The
    body is canonical orjson, so the patterns are exact.
    """
    tags = body.count(b'"$sg:')
    plain = body.count(_STRING_BLOB) + body.count(_PACKED) + body.count(_DICT_PACKED)
    return tags > 0 and tags > plain


def resolve(tree: Any, fetched: Callable[[str], bytes | None], record_id: str) -> tuple[Any, bool]:
    """Inverse of :func:`extract` and of packing; ``fetched`` gives a referenced blob's
    plaintext, or None when the store does not have it. It is called when the walk
    reaches the blob, so a caller can unseal lazily.

    Returns the tree and whether a pack's items hold tags that ``_values.revive``
    must revive (the caller checks the record's own body with :func:`needs_revival`).

    Patches ``tree`` in place (it is freshly parsed and owned by the caller):
    rebuilding every container and calling into every leaf was most of a
    2,000-message load's time outside zstd.
    """
    resolver = _Resolver(fetched, record_id)
    if type(tree) is dict or type(tree) is list:
        return resolver.walk(tree), resolver.revive
    return tree, False


def _pack_parts(body: Any, what: str, tail_type: type, record_id: str) -> list[Any]:
    """``body`` of a packed list or dict, checked to be [pack names, rest, tagged names]."""
    if (
        type(body) is not list
        or len(body) != 3
        or type(body[0]) is not list
        or type(body[1]) is not tail_type
        or type(body[2]) is not list
    ):
        raise CorruptRecordError(record_id, f"a packed {what} is not [packs, rest, tagged]")
    return body


class _Resolver:
    """One resolve's walk. A class, not nested functions: those call each other
    through their closures, a reference cycle that kept ``fetched`` (and the
    compressed packs behind it) alive after the load until the next full collection."""

    __slots__ = ("fetched", "kept", "reached", "record_id", "revive", "texts")

    def __init__(self, fetched: Callable[[str], bytes | None], record_id: str) -> None:
        self.fetched, self.record_id, self.revive = fetched, record_id, False
        self.texts: dict[str, str] = {}
        self.reached: set[str] = set()
        self.kept: dict[str, bytes] = {}

    def value(self, ref: Any) -> Any:
        kind, name = ref
        if kind == "s":
            # One string in many places is one blob: decoded once, the places share
            # the str (immutable, so sharing is safe), as they shared it when saved.
            text = self.texts.get(name)
            if text is None:
                try:
                    text = self.texts[name] = self.blob(name).decode()
                except UnicodeDecodeError:
                    raise CorruptRecordError(self.record_id, f"blob {name} is not text") from None
            return text
        return {_BYTES: base64.b64encode(self.blob(name)).decode("ascii")}

    def blob(self, name: str) -> bytes:
        data = self.kept.get(name)
        if data is not None:
            return data
        data = self.fetched(name)
        if data is None:
            raise CorruptRecordError(self.record_id, f"blob {name} is missing from the store")
        # Blobs are named by content, so one value in many places is one blob with many
        # references. Kept only once reached twice: it is fetched twice, not once per
        # place, and a blob reached once (every pack, as a rule) is not held after use.
        if name in self.reached:
            self.kept[name] = data
        self.reached.add(name)
        return data

    def packs(self, body: Any, what: str, tail_type: type) -> list[Any]:
        """The parts of a packed list or dict, each pack's items parsed and walked."""
        names, _, tagged = _pack_parts(body, what, tail_type, self.record_id)
        parts: list[Any] = []
        for name in names:
            data = self.blob(name)
            try:
                part = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise CorruptRecordError(
                    self.record_id, f"pack {name} does not decode: {exc}"
                ) from exc
            if type(part) is not list:
                raise CorruptRecordError(self.record_id, f"pack {name} is not a list")
            if name in tagged:
                # Tagged says blob references or tags; only references need the walk,
                # and a pack of LangChain messages holds tags alone (a tag each).
                if has_references(data):
                    self.walk(part)
                self.revive = self.revive or needs_revival(data)
            parts.append(part)
        return parts

    def unpack(self, body: Any) -> list[Any]:
        items: list[Any] = []
        for part in self.packs(body, "list", list):
            items.extend(part)
        items.extend(self.walk(body[1]))
        return items

    def unpack_dict(self, body: Any) -> dict[str, Any]:
        entries: dict[str, Any] = {}
        for part in self.packs(body, "dict", dict):
            try:
                entries.update(part)
            except (TypeError, ValueError) as exc:
                raise CorruptRecordError(
                    self.record_id, f"a dict pack holds no pairs: {exc}"
                ) from exc
        rest = body[1]
        self.walk_values(rest)
        entries.update(rest)
        return entries

    def walk(self, node: Any) -> Any:
        """``node`` patched, or the blob's value when ``node`` is a reference."""
        if type(node) is list:
            for i, item in enumerate(node):
                if type(item) is dict or type(item) is list:
                    node[i] = self.walk(item)
            return node
        if len(node) == 1:
            ((key, body),) = node.items()
            if key == TAG:
                # A workspace file (kind "f") stays a reference: restore_workspace reads it.
                return node if body[0] == FILE else self.value(body)
            if key == PACK:
                return self.unpack(body)
            if key == DICT_PACK:
                return self.unpack_dict(body)
            if key == _ESCAPED:
                # An escaped user dict: its keys are data, only its values are walked.
                self.walk_values(body)
                return node
        self.walk_values(node)
        return node

    def walk_values(self, node: dict[str, Any]) -> None:
        for key, item in node.items():
            if type(item) is dict or type(item) is list:
                node[key] = self.walk(item)


@dataclass(frozen=True, slots=True)
class Renamed:
    """What renaming one blob gave: its new name, and the names inside it (a tagged pack's
    loose blobs), old and new, which the record that refers to it refers to as well."""

    name: str
    inner_old: frozenset[str]
    inner_new: frozenset[str]


class Renamer:
    """Renames the blobs a record's tree refers to for ``rekey``: each gets the digest its
    plaintext has under ``storage`` (keyed by the active key), so no name is left that
    was derived from the plaintext alone (a plain store's names: anyone who guesses a
    document could confirm it is stored) or from a key being retired.

    It walks a tree as :class:`_Resolver` does, reference for reference. A tagged pack
    holds references itself: its items are renamed too, so its content, and therefore
    its own name, changes. New blobs, sealed under ``storage``, are added to ``out``.
    ``memo`` carries renames from record to record and run to run: a blob is shared.
    """

    __slots__ = ("memo", "new", "old", "out", "plain", "record_id", "storage")

    def __init__(
        self,
        plain: Callable[[str], bytes],
        storage: StorageConfig,
        memo: MutableMapping[tuple[str, bool], Renamed],
        out: dict[str, bytes],
    ) -> None:
        self.plain, self.storage, self.memo, self.out = plain, storage, memo, out
        self.record_id = ""
        self.old: set[str] = set()
        self.new: set[str] = set()

    def rename(self, tree: Any, record_id: str) -> tuple[Any, set[str], set[str]]:
        """``tree`` (parsed, owned by the caller) patched, with the old and new names it
        refers to, those inside its packs included (what the record's header lists)."""
        self.record_id, self.old, self.new = record_id, set(), set()
        if type(tree) is dict or type(tree) is list:
            tree = self.walk(tree)
        return tree, self.old, self.new

    def _renamed(self, name: str, tagged: bool) -> str:
        done = self.memo.get((name, tagged))
        if done is None:
            data = self.plain(name)
            inner_old: frozenset[str] = frozenset()
            inner_new: frozenset[str] = frozenset()
            if tagged:
                outer = self.old, self.new
                self.old, self.new = set(), set()
                try:
                    part = orjson.loads(data)
                except orjson.JSONDecodeError as exc:
                    raise CorruptRecordError(
                        self.record_id, f"pack {name} does not decode: {exc}"
                    ) from exc
                data = orjson.dumps(self.walk(part), option=orjson.OPT_SORT_KEYS)
                inner_old, inner_new = frozenset(self.old), frozenset(self.new)
                self.old, self.new = outer
            new = blob_digest(data, self.storage)
            self.out[new] = seal_blob(new, data, self.storage)
            done = self.memo[(name, tagged)] = Renamed(new, inner_old, inner_new)
        self.old.add(name)
        self.old.update(done.inner_old)
        self.new.add(done.name)
        self.new.update(done.inner_new)
        return done.name

    def walk(self, node: Any) -> Any:
        if type(node) is list:
            for i, item in enumerate(node):
                if type(item) is dict or type(item) is list:
                    node[i] = self.walk(item)
            return node
        if len(node) == 1:
            ((key, body),) = node.items()
            if key == TAG:
                kind, name, *rest = body  # a workspace file's: its mode and size
                return {TAG: [kind, self._renamed(name, False), *rest]}
            if key in (PACK, DICT_PACK):
                what, tail = ("list", list) if key == PACK else ("dict", dict)
                names, rest, tagged = _pack_parts(body, what, tail, self.record_id)
                marked = set(tagged)
                renamed = [self._renamed(n, n in marked) for n in names]
                walked = self.walk(rest) if key == PACK else self.walk_values(rest)
                new_tagged = [self._renamed(n, True) for n in tagged]
                return {key: [renamed, walked, new_tagged]}
            if key == _ESCAPED:
                self.walk_values(body)
                return node
        self.walk_values(node)
        return node

    def walk_values(self, node: dict[str, Any]) -> dict[str, Any]:
        for key, item in node.items():
            if type(item) is dict or type(item) is list:
                node[key] = self.walk(item)
        return node

"""The storage engine: write checkpoints as keyframes and deltas, load them from chains.

An :class:`Encoder` belongs to one execution of one run. It remembers the state
as of the last record it encoded (top-level containers shallow-copied), and for
each new checkpoint either

* writes a **delta** against that record (``base_id`` = its id) from the keys
  the steps changed since (:mod:`savegame.codec._delta`); or
* writes a **keyframe** (the whole state, long lists as packs:
  :mod:`savegame.codec._packs`) when ``keyframe_every`` records have been
  chained, when the chain's delta bytes would outgrow a full copy (the
  keyframe and the blobs it refers to; or the encoder's ``delta_floor``, when
  that is more), when no base is known, or when the state was migrated.

So a load reads at most ``keyframe_every`` records, and stored bytes per chain
stay below twice a full copy (or a full copy and ``delta_floor``). Large strings
and bytes become blobs, sent with the first record that needs them unless this
process knows the store has them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from savegame.codec import (
    _blobs,
    _byvalue,
    _conventions,
    _delta,
    _envelope,
    _metadata,
    _packs,
    _refs,
    _values,
)
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, NotFoundError, SerializationError
from savegame.model import (
    WORKSPACE_KEY,
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    StoredFile,
    quick_init,
)


class BlobReader(Protocol):
    """What the encoder asks of a store: which blobs it lacks. Every Store is one.

    The codec sits below the stores: it names the few reads it needs here
    rather than depend on the whole Store protocol.
    """

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        """The digests among ``digests`` that are not stored."""
        ...


class ChainReader(Protocol):
    """What a load reads from a store: a record's chain and its blobs. Every Store is one."""

    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        """The record, then its base, the base's base ... down to a keyframe."""
        ...

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each digest that exists (missing ones are left out)."""
        ...


#: Blobs new to this process, up to this many bytes in all, go with the checkpoint
#: without asking the store whether it has them. The usual step adds one new message
#: that no store holds yet, so asking cost a round trip per step for nothing; sending
#: a few KB the store may already hold costs less, and every store keeps the first
#: copy of a digest. Above this, the store is asked, so a large document shared by
#: many runs is still sent once. Well below the object store's offload threshold
#: (64 KiB), so a blob re-sent this way never becomes a second object in a bucket.
ASK_ABOVE = 16 * 1024


@quick_init  # one a delta: its fields set by plain stores, not object.__setattr__
@dataclass(frozen=True, slots=True)
class Chain:
    """Where a record sits in its chain: enough to decide the next keyframe."""

    depth: int = 0
    """Deltas between the record and its keyframe (0 for a keyframe)."""
    delta_bytes: int = 0
    """Stored bytes of those deltas."""
    keyframe_bytes: int = 0
    """Stored bytes of a full copy: the keyframe and the blobs it refers to.

    With packs the keyframe itself is small (the packs hold the long lists), so
    comparing the deltas with it alone wrote a keyframe every few steps, which
    made keyframes as many bytes as all deltas together."""

    @classmethod
    def of(cls, records: Sequence[CheckpointRecord], blob_sizes: Mapping[str, int]) -> Chain:
        """``records`` newest first; ``blob_sizes``: stored bytes of the keyframe's blobs."""
        keyframe = records[-1]
        return cls(
            depth=len(records) - 1,
            delta_bytes=sum(r.header.size for r in records[:-1]),
            keyframe_bytes=keyframe.header.size
            + sum(blob_sizes.get(name, 0) for name in keyframe.header.blobs),
        )


@quick_init  # one a checkpoint
@dataclass(frozen=True, slots=True)
class Encoded:
    """A record ready for ``put_checkpoint`` with the blobs it needs."""

    record: CheckpointRecord
    blobs: dict[str, bytes] = field(default_factory=dict)
    """Plaintext of the blobs this payload refers to; see :meth:`Encoder.to_upload`."""
    sealed: dict[str, bytes] = field(default_factory=dict)
    """Blobs already sealed: new packs."""
    deferred: dict[str, _packs.Deferred] = field(default_factory=dict)
    """The others: packs this encoder already stored once, built again only if a store lacks them."""


class Encoder:
    """Encodes successive checkpoints of one run as keyframes and deltas."""

    def __init__(
        self,
        storage: StorageConfig | None = None,
        *,
        base: CheckpointRecord | None = None,
        state: dict[str, Any] | None = None,
        chain: Chain | None = None,
        delta_floor: int = 0,
        by_value: bool = False,
    ) -> None:
        """Continue after ``base`` (a stored record whose decoded state is ``state``).

        Without a base (or when ``state`` is not what ``base`` holds, e.g. after a
        migration: pass no base then) the next record is a keyframe.

        ``delta_floor``: a chain's deltas may reach this many bytes even when a full copy
        is smaller, so a small state is not rewritten whole at every step or two (each
        keyframe stores it all again, and costs the encoder more than a delta).

        ``by_value``: the state's values may be changed in place after they are encoded
        (LangGraph's channels are: a saver stores what they held at ``put``). Then the
        encoder remembers each value as its encoded tree and compares trees, never
        objects, and packs match items by their encoding. It costs one encoding of each
        changed value a step, where the default contract (a step replaces what it
        changes, :mod:`~savegame.codec._delta`) encodes only what is new.
        """
        self.storage = resolve(storage)
        self._delta_floor = delta_floor
        self._by_value = by_value
        self._base_id: str | None = None
        self._shadow: dict[str, Any] = {}
        self._seen: dict[str, _byvalue.Seen] = {}
        self._hints: Mapping[str, _byvalue.Seen] = {}
        self._unloaded: dict[str, _byvalue.Seen] = {}
        """What :meth:`loaded` replaced, tried second until the next record: the graph
        may go on from its own objects while another thread read the state."""
        self._chain = Chain()
        self._packer = (
            _packs.Packer(self.storage, trees=by_value) if _packs.enabled(self.storage) else None
        )
        if base is not None and state is not None:
            if not by_value:
                self._remember(
                    base.checkpoint_id,
                    state,
                    changed=None,
                    chain=chain or Chain(0, 0, base.header.size),
                )
            elif _values.plain_dict(state):
                trees, seen = self._encoded(state, None)
                self._remember(
                    base.checkpoint_id,
                    trees,
                    changed=None,
                    chain=chain or Chain(0, 0, base.header.size),
                    seen=seen,
                )

    def _remember(
        self,
        base_id: str,
        state: dict[str, Any],
        *,
        changed: Collection[str] | None,
        chain: Chain,
        seen: dict[str, _byvalue.Seen] | None = None,
    ) -> None:
        # ``by_value``: ``state`` holds the encoded trees (_encoded), fresh objects nobody
        # else holds, kept as they are; ``seen``: what was learnt of the lists among them
        # encoded now. Otherwise the values themselves, top-level containers copied.
        keep = _kept if self._by_value else _delta.shallow
        seen = seen or {}
        self._unloaded = {}
        if changed is None and self._base_id is not None:
            self._hints = {}  # encoded whole after the first record: taught nothing more
        if changed is None:
            self._shadow = {k: keep(v) for k, v in state.items()}
            self._seen = dict(seen)
        else:
            for key in changed:
                if key in state:
                    self._shadow[key] = keep(state[key])
                if key in seen:
                    self._seen[key] = seen[key]
                else:
                    self._seen.pop(key, None)
            for key in self._shadow.keys() - state.keys():  # a set made in C: most steps none
                del self._shadow[key]
                self._seen.pop(key, None)
        if self._hints:  # a list known by its own record needs the other's no more
            self._hints = {k: v for k, v in self._hints.items() if k not in self._seen}
        self._base_id, self._chain = base_id, chain

    def _encoded(
        self, state: dict[str, Any], changed: Collection[str] | None
    ) -> tuple[dict[str, Any], dict[str, _byvalue.Seen]]:
        """``by_value``: the trees of ``state``'s values, those not in ``changed`` as
        remembered (None: encode all), and what was learnt of the lists encoded now.
        A list changed since the last step reuses the trees of its unchanged items."""
        room = _values.MAX_DEPTH - 1
        trees: dict[str, Any] = {}
        seen: dict[str, _byvalue.Seen] = {}
        for key, value in state.items():
            if changed is not None and key not in changed and key in self._shadow:
                trees[key] = self._shadow[key]
            elif type(value) is list:
                befores: tuple[_byvalue.Seen | None, ...]
                if changed is not None:
                    befores = (self._seen.get(key), self._unloaded.get(key), self._hints.get(key))
                elif self._base_id is None:
                    befores = (self._hints.get(key),)
                else:
                    befores = ()  # asked to encode whole
                trees[key], found = _byvalue.encode_list(value, room, *befores)
                if found is not None:
                    seen[key] = found
            elif type(value) is dict and (changed is not None or self._base_id is None):
                tree = _byvalue.encode_dict(value, room, self._known_list)
                trees[key] = _values.encode_at(value, room) if tree is None else tree
            else:
                trees[key] = _values.encode_at(value, room)
        return trees, seen

    def _known_list(self, key: str, value: list[Any]) -> _byvalue.Seen | None:
        """A list this encoder knows (its own, or taught) that ``value``, a list inside a
        dict, starts as: the same first object. A LangGraph subgraph's first checkpoint
        holds its input, ``{"messages": [...]}``, the caller's list of every message."""
        if not value:
            return None
        first = value[0]
        for known in (self._seen, self._unloaded, self._hints):
            for before in known.values():
                if before.items and before.items[0] is first:
                    return before
        return None

    @property
    def seen(self) -> Mapping[str, _byvalue.Seen]:
        """``by_value``: what this encoder knows of lists, by key: of its last record's,
        and what it was taught (:meth:`learn`) of others (for :meth:`learn` and
        :func:`~savegame.codec.encode_value`'s ``seen``)."""
        if not self._hints:
            return self._seen
        return {**self._hints, **self._seen}

    def learn(self, seen: Mapping[str, _byvalue.Seen]) -> None:
        """``by_value``, before the first record: another encoder's :attr:`seen`, for
        lists this one has not encoded yet. A LangGraph subgraph's line takes the
        parent's messages, the same objects, at its second checkpoint: it then encodes
        only the items they do not share (an item is reused only where it is the same
        object and prints the same, as from step to step), not every message again.
        Known until the state is encoded whole again (``changed=None`` after the first
        record), which uses none of it."""
        if self._base_id is None:
            self._hints = dict(seen)  # not the other's own dict, which it changes

    def loaded(self, checkpoint_id: str, state: Mapping[str, Any]) -> None:
        """``by_value``: ``state`` was decoded from ``checkpoint_id`` and handed on (a
        LangGraph ``get_tuple``, at the start of every ``invoke``). Where that is this
        encoder's last record, its lists are known by the decoded objects from now on, as
        far as each prints exactly as the list it encoded: the next step's list holds
        those objects, not the ones encoded, and was otherwise encoded whole again (every
        message of a thread at every turn). What they replace is still tried until the
        next record: another thread's read (a UI's ``get_state``) must not cost the
        graph, which goes on from its own objects, a whole encoding. Call under the
        conventions it was decoded with."""
        if checkpoint_id != self._base_id or not _conventions.current().tuples_as_lists:
            return
        for key, before in list(self._seen.items()):
            value = state.get(key)
            if type(value) is list and len(value) == len(before.items):
                printed = _byvalue.fingerprint(value)
                if printed == before.fingerprint:
                    self._seen[key] = _byvalue.Seen(
                        tuple(value), printed, before.tree, before.depth
                    )
                    self._unloaded[key] = before

    def encode(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        changed: Collection[str] | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Encoded:
        """Encode ``state``; ``changed`` names the top-level keys set since the last record
        (None: unknown, compare nothing and write a keyframe).

        ``files``: the bytes of workspace files new since the last record, by digest
        (the state's manifest, :data:`~savegame.model.WORKSPACE_KEY`, refers to them).
        The record lists every workspace file its payload refers to among its blobs;
        only those in ``files`` are uploaded, the others must be stored already.

        The encoder moves on to this record only when encoding succeeds.

        Raises:
            SerializationError: naming the path of the first value that is not pure data.
        """
        if type(state) is not dict:
            raise SerializationError(
                "state", f"the state must be a dict, not {type(state).__qualname__}"
            )
        try:
            return self._encode(header, state, changed, files or {})
        except (
            _values.Unsaveable,
            orjson.JSONEncodeError,
            UnicodeEncodeError,
            RecursionError,
        ) as exc:
            # Not data, too deep (a cycle is too deep too), a lone surrogate (orjson and
            # str.encode for blobs refuse it), or a stack gone: only now walk the state
            # again to name the path and the cause (a cycle where it starts).
            raise _values.refusal(state, "state", 0, exc) from None

    def _encode(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        changed: Collection[str] | None,
        files: Mapping[str, bytes],
    ) -> Encoded:
        config = self.storage
        chain = self._chain
        known: dict[str, Any] | None = None
        seen: dict[str, _byvalue.Seen] = {}
        if (
            self._by_value
            and self._base_id is not None
            and changed is not None
            and _values.plain_dict(state)
        ):
            # Unchanged values as remembered: the one encoding a step pays is of the
            # changed ones (a keyframe below reuses these too).
            known, seen = self._encoded(state, changed)
        if (
            self._base_id is not None
            and changed is not None
            and chain.depth + 1 < config.keyframe_every
            and _ONLY_STR(map(type, changed))
            and (known is not None or not self._by_value)
        ):
            if known is not None:
                remembered: dict[str, Any] = known
                patch = _delta.diff_trees(self._shadow, known, changed)
            else:
                remembered = state
                patch = _delta.diff(self._shadow, state, changed)
            found: dict[str, bytes] = {}
            refs: set[str] = set()
            body = orjson.dumps(patch, option=orjson.OPT_SORT_KEYS)
            # No leaf of a body this short outgrows the inline limit, and one without the
            # tag names no workspace file: the walk that looks for either is skipped (most
            # steps; it was a tenth of a LangGraph checkpoint's CPU, 700 calls a run). A
            # body without a "$" has no tag: memchr says so far faster than the tag's own
            # search, which stops at each of JSON's quotes (5.7k instructions a 2 KB body).
            if len(body) > config.inline_max or (b"$" in body and _refs.TAG_BYTES in body):
                body = orjson.dumps(
                    _refs.extract(patch, config, found, limit=config.inline_max, files=refs),
                    option=orjson.OPT_SORT_KEYS,
                )
            _attach(found, refs, files)
            record = _envelope.seal_record(
                header,
                body,
                delta=True,
                storage=config,
                base_id=self._base_id,
                blobs=tuple(sorted({*found, *refs})),
            )
            grown = chain.delta_bytes + record.header.size
            if grown <= max(chain.keyframe_bytes, self._delta_floor):
                self._remember(
                    record.checkpoint_id,
                    remembered,
                    changed=changed,
                    chain=Chain(chain.depth + 1, grown, chain.keyframe_bytes),
                    seen=seen,
                )
                return Encoded(record, found)
        if known is not None:
            return self._keyframe(header, state, files, (known, seen))
        return self._keyframe(header, state, files)

    def _keyframe(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        files: Mapping[str, bytes],
        known: tuple[dict[str, Any], dict[str, _byvalue.Seen]] | None = None,
    ) -> Encoded:
        """``known``: the state's trees already encoded, and its lists' ``Seen`` (``by_value``)."""
        config = self.storage
        out = _packs.Packed()
        refs: set[str] = set()
        rest, manifest = _split_manifest(state)
        trees: dict[str, Any] | None = None
        seen: dict[str, _byvalue.Seen] = {}
        if self._by_value and manifest is None:
            if known is not None:
                trees, seen = known
            elif _values.plain_dict(rest):
                trees, seen = self._encoded(rest, None)
        if trees is not None:
            if self._packer is not None:
                tree = self._packer.tree(trees, out)
            else:
                tree = _refs.extract(trees, config, out.found)
        elif self._packer is not None and not self._by_value:
            tree = self._packer.tree(rest, out)
        else:
            tree = _refs.extract(_values.encode_at(rest, _values.MAX_DEPTH), config, out.found)
        if manifest is not None:
            # Inline, never packed: a load then finds its file references in the record's
            # own body and leaves their blobs unread (see load_chain).
            inline = _refs.extract(
                _values.encode_at(manifest, _values.MAX_DEPTH - 2),
                config,
                out.found,
                limit=None,
                files=refs,
            )
            if rest:
                tree[WORKSPACE_KEY] = inline
            else:  # alone in the state: escaped, as any lone "$sg:" key is (_values)
                tree = {"$sg:dict": {WORKSPACE_KEY: inline}}
            _attach(out.found, refs, files)
        elif type(state.get(WORKSPACE_KEY)) is dict:
            # Left in the state (the rest is a tagged tree: a lone "$sg:" key of the
            # user's): its files are listed and sent all the same, or no restore finds them.
            refs.update(_manifest_files(state[WORKSPACE_KEY]))
            _attach(out.found, refs, files)
        body = orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
        record = _envelope.seal_record(
            header,
            body,
            delta=False,
            storage=config,
            base_id=None,
            blobs=tuple(sorted({*out.found, *out.sealed, *out.deferred, *refs})),
        )
        # Loose values count at their plaintext size: only new ones get sealed here.
        copy = record.header.size + out.pack_bytes + sum(map(len, out.found.values()))
        if not self._by_value:
            self._remember(record.checkpoint_id, state, changed=None, chain=Chain(0, 0, copy))
        elif trees is not None:
            self._remember(
                record.checkpoint_id, trees, changed=None, chain=Chain(0, 0, copy), seen=seen
            )
        else:  # a state that is not a plain dict (or holds a manifest): keyframes only
            self._base_id, self._shadow, self._seen, self._hints = None, {}, {}, {}
        return Encoded(record, out.found, out.sealed, out.deferred)

    def to_upload(self, store: BlobReader, encoded: Encoded) -> dict[str, bytes]:
        """The sealed bytes of the blobs the store may not have.

        Up to :data:`ASK_ABOVE` bytes of blobs this process does not know are sent
        without asking; above that the store is asked once which it lacks.
        """
        referred = [*encoded.blobs, *encoded.sealed, *encoded.deferred]
        if not referred:
            return {}
        names = sorted(set(referred) - _blobs.known_blobs.present(store, referred))
        if not names:
            return {}

        def size(name: str) -> int:
            for ready in (encoded.blobs.get(name), encoded.sealed.get(name)):
                if ready is not None:
                    return len(ready)
            return encoded.deferred[name].size

        def sealed(name: str) -> bytes:
            done = encoded.sealed.get(name)
            if done is not None:
                return done
            plain = encoded.blobs.get(name)
            if plain is None:
                plain = encoded.deferred[name].build()
            return _blobs.seal_blob(name, plain, self.storage)

        missing: Collection[str] = names
        if sum(map(size, names)) > ASK_ABOVE:
            missing = store.missing_blobs(names)
            _blobs.known_blobs.add(store, [n for n in names if n not in missing])
        return {n: sealed(n) for n in sorted(missing)}

    def committed(self, store: BlobReader, record: CheckpointRecord) -> None:
        """Call once ``record`` is durable: its blobs are then known to be stored."""
        _blobs.known_blobs.add(store, record.header.blobs)
        if self._packer is not None and record.header.base_id is None:
            self._packer.committed(record.header.blobs)


def _kept(tree: Any) -> Any:
    """What a ``by_value`` encoder remembers of an encoded tree: the tree itself."""
    return tree


def _split_manifest(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The state without its workspace manifest, and the manifest, when the keyframe
    tree of the rest is a plain dict the manifest can be put back into."""
    manifest = state.get(WORKSPACE_KEY)
    if type(manifest) is not dict:
        return state, None
    rest = {k: v for k, v in state.items() if k != WORKSPACE_KEY}
    if not _values.plain_dict(rest):
        return state, None  # the rest would be a tagged tree: encode the state whole
    return rest, manifest


def _manifest_files(manifest: dict[Any, Any]) -> set[str]:
    """The blobs of a workspace manifest's files."""
    return {entry.digest for entry in manifest.values() if type(entry) is StoredFile}


#: Whether the types given are all ``str``: each key's type checked in C, not by a
#: generator's resumption (2k instructions a step).
_ONLY_STR = frozenset((str,)).issuperset


def _attach(found: dict[str, bytes], refs: set[str], files: Mapping[str, bytes]) -> None:
    """Add to ``found`` the bytes of the workspace files ``refs`` names that are at hand."""
    for name in refs:
        data = files.get(name)
        if data is not None:
            found[name] = data


_FILE_REF = re.compile(rb'\{"\$sg:blob":\["f","([0-9a-f]+)"')


def _file_refs(body: bytes) -> set[str]:
    """The workspace files a record's body refers to (canonical JSON: exact pattern)."""
    if _refs.FILE_BYTES not in body:
        return set()
    return {m.decode() for m in _FILE_REF.findall(body)}


class _Blobs(Mapping[str, bytes]):
    """The chain's blobs read at once, but for workspace files, read only if asked (a
    state blob that happens to have a file's content)."""

    def __init__(
        self,
        store: ChainReader,
        read: dict[str, bytes],
        unread: set[str],
        listed: Collection[str] = (),
    ) -> None:
        self.store, self.read, self.unread, self.listed = store, read, unread, listed

    def of(self, listed: Sequence[str]) -> _Blobs:
        """The blobs one record lists (it may use no other)."""
        return _Blobs(self.store, self.read, self.unread, frozenset(listed))

    def __getitem__(self, name: str) -> bytes:
        if name not in self.listed:
            raise KeyError(name)
        if name not in self.read and name in self.unread:
            self.unread.discard(name)
            self.read.update(self.store.get_blobs([name]))
        return self.read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.read)

    def __len__(self) -> int:
        return len(self.read)


@dataclass(frozen=True, slots=True)
class LoadedCheckpoint:
    checkpoint: Checkpoint
    chain: Chain


def load_chain(
    store: ChainReader, record: CheckpointRecord, storage: StorageConfig | None = None
) -> LoadedCheckpoint:
    """Decode ``record`` (fetching its chain when it is a delta) with the chain's position.

    Raises:
        CorruptRecordError: a record of the chain failed its check or does not fit.
        EncryptionKeyError: a record's key id is not in the keyring.
        NotFoundError: a base the record needs is missing.
    """
    config = resolve(storage)
    records = [record] if record.header.base_id is None else store.get_chain(record.checkpoint_id)
    if not records or records[0].checkpoint_id != record.checkpoint_id:
        raise NotFoundError("checkpoint chain", record.checkpoint_id)
    for newer, older in itertools.pairwise(records):
        if newer.header.base_id != older.checkpoint_id:
            raise CorruptRecordError(
                newer.checkpoint_id, f"chain broken at base {newer.header.base_id}"
            )
    if records[-1].header.base_id is not None:
        raise CorruptRecordError(record.checkpoint_id, "chain does not end at a keyframe")
    opened = [(rec, *_envelope.open_record(rec, config)) for rec in reversed(records)]
    # Every blob of the chain in one read, not one read per record; workspace files are
    # read by restore_workspace, not by a load.
    files = {name for _, _, body in opened for name in _file_refs(body)}
    names = sorted({name for rec in records for name in rec.header.blobs} - files)
    prefetched = _Blobs(store, store.get_blobs(names) if names else {}, files)

    def fetch(wanted: Sequence[str]) -> Mapping[str, bytes]:
        return prefetched.of(wanted)

    head = records[0]
    state: dict[str, Any] | None = None
    for rec, is_delta, body in opened:
        tree, revive = _envelope.parse(body, rec, fetch, config)
        if state is None:
            if is_delta:
                raise CorruptRecordError(rec.checkpoint_id, "chain starts with a delta")
            state = _envelope.state_of(tree, revive, rec.checkpoint_id)
            continue
        if not is_delta or type(tree) is not dict:
            raise CorruptRecordError(rec.checkpoint_id, "expected a delta in the chain")
        try:
            _delta.apply(state, tree)
        except SerializationError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptRecordError(rec.checkpoint_id, f"delta does not apply: {exc}") from exc
    assert state is not None
    header = _metadata.reveal_metadata(head.header, config)
    sizes = {name: len(data) for name, data in prefetched.read.items()}
    return LoadedCheckpoint(Checkpoint(header=header, state=state), Chain.of(records, sizes))


def load_state(
    store: ChainReader, record: CheckpointRecord, storage: StorageConfig | None = None
) -> Checkpoint:
    """:func:`load_chain` without the chain position."""
    return load_chain(store, record, storage).checkpoint

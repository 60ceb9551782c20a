"""Checkpoint records: the stored bytes of one checkpoint and their integrity check.

Format 1 (written before the storage engine): the payload is the canonical JSON
of the whole state; ``checksum`` is BLAKE2b-128 over the record's identity and
the payload. Still read, never written (except when rewrapping a format-1 record).

Format 2: the payload is an envelope::

    b"SG" | version (2) | flags | key-id length | key id | body
    flags: 1 delta (body is a patch against header.base_id, else the whole state)
           2 zstd (body compressed)      4 AES-256-GCM (body = nonce + ciphertext + tag)

The JSON inside is a keyframe (the state's ``to_data`` tree) or a delta
(:mod:`savegame.codec._delta`), with large values replaced by blob references
(:mod:`savegame.codec._refs`). The stored record's version (3 and 4 share
the envelope's version byte 2) decides what its integrity covers, its identity:
from format 4 every header field but the size (``next``, status, step, node,
usage, metadata, times, parent, base, state version, blob digests); formats 2
and 3 only the ids, base, state version and blob digests, so with a keyring
they are refused until ``savegame rekey`` rewrites them. The check:

* encrypted: the GCM tag, with the envelope prefix and the identity as
  associated data, so a payload moved under another id, base or key id fails
  to open, and a header edited without the key fails too; ``checksum`` is
  then just the marker ``"aes-gcm"``.
* plain: BLAKE2b-128 over the same identity and the *stored* bytes. Hashing
  the compressed body, not the JSON, keeps the cost proportional to what is
  stored: deltas are small and a compressed keyframe is several times smaller
  than its JSON, so the measured 0.6 ms for an 830 KB payload becomes ~0.1 ms.
  A cheaper non-cryptographic hash (crc32) would save little more and lose
  the strength against deliberate edits that a keyed-less BLAKE2b still gives
  over accidental ones.

``header.blobs`` lists the blobs this payload itself refers to; a state needs
the blobs of its whole chain (record, bases, keyframe), which retention keeps
together anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from savegame.codec import _blobs, _compress, _refs, _values
from savegame.codec._metadata import seal_metadata
from savegame.codec.crypto import key_id
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    CorruptRecordError,
    EncryptionKeyError,
    SerializationError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
)
from savegame.model import FORMAT_VERSION, CheckpointHeader, CheckpointRecord, evolver

DELTA, ZSTD, AEAD = 1, 2, 4
# Every record sealed copies its header with these fields (the others as they are).
_seal_header = evolver(CheckpointHeader, "size", "format_version", "base_id", "blobs")
_SAME: Any = object()  # seal_record's base_id or blobs not given: the header's own
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_MAGIC = b"SG"
_AEAD_MARK = "aes-gcm"
Fetch = Callable[[Sequence[str]], Mapping[str, bytes]]


def format1_checksum(header: CheckpointHeader, payload: bytes) -> str:
    """Format 1's checksum (kept for reading and rewrapping format-1 records)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{header.run_id}\0{header.checkpoint_id}\0{header.format_version}\0".encode())
    digest.update(payload)
    return digest.hexdigest()


def micros(value: datetime) -> int:
    """``value`` as integer microseconds since the epoch, as identities hold times."""
    return (value - _EPOCH) // _MICROSECOND


def _identity(header: CheckpointHeader) -> bytes:
    if header.format_version >= 4:
        # Every field but the size: what decides what runs next (next, status, step),
        # what a person reads (usage, metadata), and where the record sits (parent, base).
        usage = header.usage
        fields = [
            header.thread_id, header.run_id, header.checkpoint_id, header.parent_id,
            header.base_id, header.step, header.node, header.status.value, header.next,
            [usage.input_tokens, usage.output_tokens, usage.cost_usd, usage.llm_calls,
             usage.tool_calls],
            header.metadata, micros(header.created_at),
            None if header.expires_at is None else micros(header.expires_at),
            header.format_version, header.state_version, list(header.blobs),
        ]  # fmt: skip
        try:
            return b"savegame-4\0" + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        except TypeError as exc:  # orjson.JSONEncodeError
            raise SerializationError("metadata", f"not JSON-compatible: {exc}") from None
    # From format 3 on the version is bound too, so a header cannot be passed off as
    # an older format; format 2's identity stays as it was written.
    version = f"v{header.format_version}\0" if header.format_version >= 3 else ""
    return (
        f"{header.thread_id}\0{header.run_id}\0{header.checkpoint_id}\0{header.base_id or ''}\0"
        f"{header.state_version}\0{' '.join(header.blobs)}\0{version}"
    ).encode()


def _stored_identity(header: CheckpointHeader) -> bytes:
    """:func:`_identity` of a header read back: one that does not encode is damaged."""
    try:
        return _identity(header)
    except (SerializationError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(
            header.checkpoint_id, f"its header does not encode: {exc}"
        ) from None


def _checksum2(header: CheckpointHeader, payload: bytes) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(b"savegame-2\0" + _identity(header))
    digest.update(payload)
    return digest.hexdigest()


def seal_record(
    header: CheckpointHeader,
    body: bytes,
    *,
    delta: bool,
    storage: StorageConfig,
    base_id: str | None = _SAME,
    blobs: tuple[str, ...] = _SAME,
) -> CheckpointRecord:
    """Wrap a JSON body (keyframe or delta) into a stored record under ``header``.

    Every record is stamped :data:`~savegame.model.FORMAT_VERSION`, whose identity
    covers the whole header (a keyframe may hold packed lists, which a reader before
    format 3 could not read; it refuses the record by its version). ``base_id`` and
    ``blobs``, when given, are set in the same copy (the header's own otherwise).
    """
    version = FORMAT_VERSION
    header = seal_metadata(header, storage)
    if base_id is _SAME:
        base_id = header.base_id
    if blobs is _SAME:
        blobs = header.blobs
    flags = DELTA if delta else 0
    if storage.compress_threshold and len(body) >= storage.compress_threshold:
        small = _compress.compress(body, level=_compress.RECORD_LEVEL)
        if len(small) < len(body):
            flags, body = flags | ZSTD, small
    ring = storage.keyring
    if ring is None:
        payload = _MAGIC + bytes([2, flags, 0]) + body
        header = _seal_header(header, len(payload), version, base_id, blobs)
        return CheckpointRecord(
            header=header, payload=payload, checksum=_checksum2(header, payload)
        )
    flags |= AEAD
    kid = ring.active.encode()
    prefix = _MAGIC + bytes([2, flags, len(kid)]) + kid
    size = len(prefix) + len(body) + 28  # nonce (12) + tag (16)
    header = _seal_header(header, size, version, base_id, blobs)
    _, sealed = ring.encrypt(body, prefix + _identity(header))
    return CheckpointRecord(header=header, payload=prefix + sealed, checksum=_AEAD_MARK)


def open_record(
    record: CheckpointRecord, storage: StorageConfig, *, limit: int | None = None
) -> tuple[bool, bytes]:
    """Verify a record and return (is_delta, JSON body); ``limit``: the most bytes a
    compressed body may unpack to (refused before allocating).

    Raises:
        CorruptRecordError: failed check, unknown format, or plaintext where encryption is required.
        EncryptionKeyError: encrypted with a key id the keyring does not hold.
    """
    header, payload = record.header, record.payload
    ident = header.checkpoint_id
    if header.format_version > FORMAT_VERSION:
        raise CorruptRecordError(
            ident,
            f"format version {header.format_version} is newer than this savegame understands "
            f"({FORMAT_VERSION}); upgrade savegame",
        )
    strict = storage.keyring is not None and not storage.accept_plaintext
    if header.format_version < 2:
        if strict:
            raise UnencryptedRecordError(ident)
        if format1_checksum(header, payload) != record.checksum:
            raise CorruptRecordError(ident, "checksum mismatch")
        return False, payload
    if payload[:3] != _MAGIC + b"\x02" or len(payload) < 5:
        raise CorruptRecordError(ident, "not a format-2 envelope")
    flags, kid_len = payload[3], payload[4]
    end = 5 + kid_len
    body = payload[end:]
    if bool(flags & DELTA) != (header.base_id is not None):
        raise CorruptRecordError(ident, "envelope and header disagree on the delta base")
    if flags & AEAD:
        kid = key_id(payload[5:end], ident)
        if storage.keyring is None:
            raise EncryptionKeyError(kid, ident)
        if strict and header.format_version < 4:
            # Its tag covers the payload and the ids but not next, status or step, which
            # anyone with write access could have changed.
            raise UnauthenticatedRecordError(
                ident,
                f"a format-{header.format_version} record, whose header is not authenticated,",
            )
        body = storage.keyring.decrypt(kid, body, payload[:end] + _stored_identity(header), ident)
    else:
        if strict:
            raise UnencryptedRecordError(ident)
        digest = hashlib.blake2b(digest_size=16)
        digest.update(b"savegame-2\0" + _stored_identity(header))
        digest.update(payload)
        if digest.hexdigest() != record.checksum:
            raise CorruptRecordError(ident, "checksum mismatch")
    if flags & ZSTD:
        try:
            body = _compress.decompress(body, limit=limit)
        except Exception as exc:
            raise CorruptRecordError(ident, f"payload does not decompress: {exc}") from exc
    return bool(flags & DELTA), body


def parse(
    body: bytes, record: CheckpointRecord, fetch: Fetch | None, storage: StorageConfig
) -> tuple[Any, bool]:
    """JSON body -> data tree with blob references resolved (not yet ``revive``),
    and whether ``revive`` must revive tags in it (see :func:`state_of`)."""
    try:
        tree = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CorruptRecordError(record.checkpoint_id, f"payload does not decode: {exc}") from exc
    revive = _refs.needs_revival(body)
    names = record.header.blobs
    if not names:
        return tree, revive
    if fetch is None:
        # Workspace files stay references (restore_workspace reads them): a record that
        # lists only those (a fork's first, codec.encode's) decodes without a store.
        def nowhere(name: str) -> bytes | None:
            raise CorruptRecordError(
                record.checkpoint_id, "refers to blobs but no store was given to read them"
            )

        return _refs.resolve(tree, nowhere, record.checkpoint_id)[0], revive
    stored = fetch(names)

    def plain(name: str) -> bytes | None:
        # Unsealed when the walk reaches it, so each pack's plaintext is parsed and
        # freed before the next is decompressed: a fresh process then faults in one
        # pack's worth of new pages for them, not all of them (4 MB at 2,000 messages).
        sealed = stored.get(name)
        return None if sealed is None else _blobs.unseal_blob(name, sealed, storage)

    tree, in_packs = _refs.resolve(tree, plain, record.checkpoint_id)
    return tree, revive or in_packs


def state_of(tree: Any, revive: bool, ident: str) -> dict[str, Any]:
    """The state from a resolved tree; ``revive``: it holds tags for ``_values.revive``."""
    try:
        state = _values.revive(tree) if revive else tree
    except SerializationError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRecordError(ident, f"payload does not decode: {exc}") from exc
    if type(state) is not dict:
        raise CorruptRecordError(ident, "payload is not a state object")
    return state

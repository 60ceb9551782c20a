"""Checkpoint records: the stored bytes of one checkpoint and their integrity check.

Format 1 (written before the storage engine): the payload is the canonical JSON
of the whole state; ``checksum`` is BLAKE2b-128 over the record's identity and
the payload. Still read, never written (except when rewrapping a format-1 record).

Format 2: the payload is an envelope::

    b"SG" | version (2) | flags | key-id length | key id | body
    flags: 1 delta (body is a patch against header.base_id, else the whole state)
           2 zstd (body compressed)      4 AES-256-GCM (body = nonce + ciphertext + tag)

The JSON inside is a keyframe (the state's ``to_data`` tree) or a delta
(:mod:`savegame.codec.delta`), with large values replaced by blob references
(:mod:`savegame.codec.blobs`). The stored record's version (3 and 4 share
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

import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from savegame.codec import blobs, compress, values
from savegame.codec.crypto import Keyring, key_id, unbase64
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import (
    ConfigurationError,
    CorruptRecordError,
    EncryptionKeyError,
    SerializationError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
)
from savegame.ids import new_id
from savegame.model import (
    FORMAT_VERSION,
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    RunInfo,
    RunStatus,
    utcnow,
)

DELTA, ZSTD, AEAD = 1, 2, 4
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
ALWAYS_SEALED = frozenset({"error"})
"""Metadata keys sealed whenever a keyring is configured: an error message repeats what
failed (a call's arguments, a rejection's reason), which may be an encrypted value."""
_MAGIC = b"SG"
_AEAD_MARK = "aes-gcm"
_META = "$sg:enc:"
Fetch = Callable[[Sequence[str]], Mapping[str, bytes]]


def checksum(header: CheckpointHeader, payload: bytes) -> str:
    """Format 1's checksum (kept for reading and rewrapping format-1 records)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{header.run_id}\0{header.checkpoint_id}\0{header.format_version}\0".encode())
    digest.update(payload)
    return digest.hexdigest()


def _micros(value: datetime) -> int:
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
            header.metadata, _micros(header.created_at),
            None if header.expires_at is None else _micros(header.expires_at),
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


# -- run rows --------------------------------------------------------------------------
_RUN_PLAIN, _RUN_KEYED = "c1:", "m1:"


def _run_covered(info: RunInfo) -> bytes:
    # What never changes after create_run; status, step and head move with every
    # checkpoint (whose own header is authenticated) and are checked against it.
    fields = [
        info.run_id, info.thread_id, info.workflow, info.workflow_ref,
        _micros(info.created_at), info.metadata,
    ]  # fmt: skip
    return b"savegame-run-1\0" + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def run_checksum(info: RunInfo, storage: StorageConfig | None) -> str:
    """The check a run row carries (``RunInfo.checksum``): keyed under a keyring.

    It covers the ids, the workflow's name and reference (which ``resume`` imports:
    with a forged reference, a database edit would become code execution), the
    creation time and the metadata.
    """
    ring = resolve(storage).keyring
    if ring is None:
        return _RUN_PLAIN + hashlib.blake2b(_run_covered(info), digest_size=16).hexdigest()
    return f"{_RUN_KEYED}{ring.active}:{ring.mac(_run_covered(info))}"


def verify_run(info: RunInfo, storage: StorageConfig | None) -> RunInfo:
    """``info`` if its check holds. With a keyring only a keyed check counts; without
    one a row written before rows had checks (empty checksum) is accepted as it is.

    Raises:
        CorruptRecordError: the check fails.
        UnauthenticatedRecordError: with a keyring, the row has no keyed check.
        EncryptionKeyError: the check's key id is not in the keyring.
    """
    config = resolve(storage)
    ring = config.keyring
    strict = ring is not None and not config.accept_plaintext
    label, check = f"run {info.run_id}", info.checksum
    try:
        covered = _run_covered(info)
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(label, f"its row does not encode: {exc}") from None
    if check.startswith(_RUN_KEYED):
        kid, _, tag = check[len(_RUN_KEYED) :].partition(":")
        if ring is None:
            raise EncryptionKeyError(kid, label)
        if ring.check_mac(covered, kid, tag, label):
            return info
    elif strict:
        raise UnauthenticatedRecordError(label, "a run row without a keyed check")
    elif not check or hashlib.blake2b(_run_covered(info), digest_size=16).hexdigest() == check[3:]:
        return info
    raise CorruptRecordError(label, "run row checksum mismatch (workflow, thread or metadata)")


def check_head(info: RunInfo, head: CheckpointRecord) -> None:
    """The run row and its head checkpoint are written in one transaction, so they agree
    on run and status; the head's header is checked when it loads, the row's copy here.

    Raises:
        CorruptRecordError: they disagree (an edited row, or damage).
    """
    if head.run_id != info.run_id or head.header.status is not info.status:
        raise CorruptRecordError(
            f"run {info.run_id}",
            f"its row says {info.status.value}, but its head {head.checkpoint_id} belongs to "
            f"run {head.run_id} and says {head.header.status.value}",
        )


def reseal_run(info: RunInfo, reader: StorageConfig, writer: StorageConfig) -> RunInfo:
    """The run row sealed again under ``writer``'s active key (``rekey``): its sensitive
    metadata, its error text, and its check.

    Raises:
        EncryptionKeyError: a sealed value's key id is not in ``reader``'s keyring.
    """
    verify_run(info, reader)
    error, label = info.error, f"run {info.run_id} error"
    if isinstance(error, str) and _is_sealed(error):
        kid = error[len(_META) :].partition(":")[0]
        if reader.keyring is None:
            raise EncryptionKeyError(kid, label)
        reader.keyring.key(kid, label)  # a missing key is an error here, not a sealed text
        error = _reveal_error(info.run_id, error, reader.keyring)
    metadata = reseal_run_metadata(info.run_id, info.metadata, reader, writer)
    fresh = replace(info, metadata=metadata, error=seal_error(info.run_id, error, writer))
    return replace(fresh, checksum=run_checksum(fresh, writer))


# -- error texts on run rows ---------------------------------------------------------
def seal_error(run_id: str, text: str | None, storage: StorageConfig | None) -> str | None:
    """A run row's error text as stored: sealed under a keyring (bound to the run).

    An error repeats what failed (an in-doubt call's arguments, a step's exception,
    a rejection's reason), so with encryption configured it is never stored in the clear.
    """
    if text is None:
        return None  # every step's checkpoint: no configuration lookup for nothing
    ring = resolve(storage).keyring
    if ring is None or _is_sealed(text):
        return text
    kid, sealed = ring.encrypt(text.encode(), f"run-error\0{run_id}".encode())
    return f"{_META}{kid}:{base64.b64encode(sealed).decode('ascii')}"


def _reveal_error(run_id: str, text: str | None, ring: Keyring) -> str | None:
    if text is None or not _is_sealed(text):
        return text
    kid, _, body = text[len(_META) :].partition(":")
    if kid not in ring.keys:
        return text  # as for metadata: one old run must not make a listing fail
    aad = f"run-error\0{run_id}".encode()
    label = f"run {run_id} error"
    plain = ring.decrypt(kid, unbase64(body, label), aad, label)
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise CorruptRecordError(label, "its error text is not text") from None


# -- sensitive metadata --------------------------------------------------------------
def _is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(_META)


def refuse_reserved(metadata: Mapping[str, Any], where: str = "metadata") -> None:
    """Refuse a metadata value that would read as a sealed one (and fail to decrypt).

    Raises:
        SerializationError: naming the key whose value starts with ``$sg:enc:``.
    """
    for key, value in metadata.items():
        if _is_sealed(value):
            raise SerializationError(
                f"{where}[{key!r}]",
                f"a metadata value may not start with {_META!r}, which marks encrypted values",
            )


def _sealed_keys(metadata: Mapping[str, Any]) -> list[str]:
    return [k for k, v in metadata.items() if _is_sealed(v)]


def _seal_values(
    run_id: str, metadata: Mapping[str, Any], keys: frozenset[str], ring: Keyring
) -> dict[str, Any]:
    """``metadata`` with the values of ``keys`` encrypted, bound to the run and the key name."""
    meta = dict(metadata)
    for key in keys & meta.keys():
        value = meta[key]
        if _is_sealed(value):
            continue  # carried over from an earlier record of the same run
        kid, sealed = ring.encrypt(orjson.dumps(value), f"meta\0{run_id}\0{key}".encode())
        meta[key] = f"{_META}{kid}:{base64.b64encode(sealed).decode('ascii')}"
    return meta


def _reveal_values(
    run_id: str,
    metadata: Mapping[str, Any],
    ring: Keyring,
    ident: str,
    *,
    missing_keys_ok: bool = False,
) -> dict[str, Any]:
    """``metadata`` with sealed values decrypted; ``missing_keys_ok``: a value sealed
    under a key the ring lacks stays sealed instead of raising EncryptionKeyError."""
    meta = dict(metadata)
    for key in _sealed_keys(metadata):
        kid, _, body = meta[key][len(_META) :].partition(":")
        if missing_keys_ok and kid not in ring.keys:
            continue
        aad = f"meta\0{run_id}\0{key}".encode()
        label = f"{ident} metadata {key!r}"
        try:
            meta[key] = orjson.loads(ring.decrypt(kid, unbase64(body, label), aad, label))
        except orjson.JSONDecodeError:
            raise CorruptRecordError(label, "its sealed value does not decode") from None
    return meta


def seal_metadata(header: CheckpointHeader, storage: StorageConfig) -> CheckpointHeader:
    """Encrypt the values of sensitive metadata keys (bound to the run and the key name)."""
    ring = storage.keyring
    if ring is None:
        return header
    keys = storage.sensitive_metadata | ALWAYS_SEALED
    if keys.isdisjoint(header.metadata):
        return header
    sealed = _seal_values(header.run_id, header.metadata, keys, ring)
    return replace(header, metadata=sealed)


def reseal_metadata(
    header: CheckpointHeader, reader: StorageConfig, writer: StorageConfig
) -> CheckpointHeader:
    """Sensitive metadata sealed again under ``writer``'s active key (``rekey``).

    Every key sealed before stays sealed, even one no longer configured as
    sensitive, and plaintext values of configured keys get sealed.

    Raises:
        EncryptionKeyError: a sealed value's key id is not in ``reader``'s keyring.
    """
    meta = reseal_run_metadata(
        header.run_id, header.metadata, reader, writer, ident=header.checkpoint_id
    )
    return replace(header, metadata=meta)


def reseal_run_metadata(
    run_id: str,
    metadata: Mapping[str, Any],
    reader: StorageConfig,
    writer: StorageConfig,
    *,
    ident: str | None = None,
) -> dict[str, Any]:
    """:func:`reseal_metadata` for a metadata mapping of ``run_id`` (a run row's copy)."""
    if writer.keyring is None:
        raise ConfigurationError("resealing metadata needs a keyring to seal with")
    label = ident or f"run {run_id}"
    sealed = _sealed_keys(metadata)
    revealed = dict(metadata)
    if sealed:
        if reader.keyring is None:
            kid = metadata[sealed[0]][len(_META) :].partition(":")[0]
            raise EncryptionKeyError(kid, f"{label} metadata {sealed[0]!r}")
        revealed = _reveal_values(run_id, metadata, reader.keyring, label)
    keys = writer.sensitive_metadata | ALWAYS_SEALED | set(sealed)
    return _seal_values(run_id, revealed, frozenset(keys), writer.keyring)


def reveal_metadata(
    header: CheckpointHeader, storage: StorageConfig | None = None
) -> CheckpointHeader:
    """The header with sensitive metadata decrypted (left sealed when no keyring is given)."""
    if not _sealed_keys(header.metadata):
        return header  # the common case: no keyring lookup per header (history lists thousands)
    ring = resolve(storage).keyring
    if ring is None:
        return header
    return replace(
        header,
        metadata=_reveal_values(header.run_id, header.metadata, ring, header.checkpoint_id),
    )


def reveal_run_metadata(info: RunInfo, storage: StorageConfig | None = None) -> RunInfo:
    """The run row with its sensitive metadata and error text decrypted where the
    keyring holds the key.

    A value under a key the keyring lacks stays sealed: one old run must not make
    a listing of all runs fail (damage still raises CorruptRecordError).
    """
    config = resolve(storage)
    ring = config.keyring
    if ring is not None and not config.accept_plaintext:
        info = _unsealed_error(info)
    if not _sealed_keys(info.metadata) and not _is_sealed(info.error):
        return info
    if ring is None:
        return info
    revealed = _reveal_values(
        info.run_id, info.metadata, ring, f"run {info.run_id}", missing_keys_ok=True
    )
    return replace(info, metadata=revealed, error=_reveal_error(info.run_id, info.error, ring))


def _unsealed_error(info: RunInfo) -> RunInfo:
    # Under a keyring every error text is written sealed: a plain one was put there by
    # someone else, and must not read as savegame's ("paid; run savegame resolve --done").
    if info.error is None or _is_sealed(info.error):
        return info
    return replace(info, error=f"(not written by savegame, not authenticated) {info.error}")


# -- format-2 envelope ---------------------------------------------------------------
def seal_record(
    header: CheckpointHeader,
    body: bytes,
    *,
    delta: bool,
    storage: StorageConfig,
) -> CheckpointRecord:
    """Wrap a JSON body (keyframe or delta) into a stored record under ``header``.

    Every record is stamped :data:`~savegame.model.FORMAT_VERSION`, whose identity
    covers the whole header (a keyframe may hold packed lists, which a reader before
    format 3 could not read; it refuses the record by its version).
    """
    version = FORMAT_VERSION
    header = seal_metadata(header, storage)
    flags = DELTA if delta else 0
    if storage.compress_threshold and len(body) >= storage.compress_threshold:
        small = compress.compress(body)
        if len(small) < len(body):
            flags, body = flags | ZSTD, small
    ring = storage.keyring
    if ring is None:
        payload = _MAGIC + bytes([2, flags, 0]) + body
        header = replace(header, size=len(payload), format_version=version)
        return CheckpointRecord(
            header=header, payload=payload, checksum=_checksum2(header, payload)
        )
    flags |= AEAD
    kid = ring.active.encode()
    prefix = _MAGIC + bytes([2, flags, len(kid)]) + kid
    size = len(prefix) + len(body) + 28  # nonce (12) + tag (16)
    header = replace(header, size=size, format_version=version)
    _, sealed = ring.encrypt(body, prefix + _identity(header))
    return CheckpointRecord(header=header, payload=prefix + sealed, checksum=_AEAD_MARK)


def open_record(record: CheckpointRecord, storage: StorageConfig) -> tuple[bool, bytes]:
    """Verify a record and return (is_delta, JSON body).

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
        if checksum(header, payload) != record.checksum:
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
            body = compress.decompress(body)
        except Exception as exc:
            raise CorruptRecordError(ident, f"payload does not decompress: {exc}") from exc
    return bool(flags & DELTA), body


def parse(
    body: bytes, record: CheckpointRecord, fetch: Fetch | None, storage: StorageConfig
) -> tuple[Any, bool]:
    """JSON body -> data tree with blob references resolved (not yet ``from_data``),
    and whether ``from_data`` must revive tags in it (see :func:`state_of`)."""
    try:
        tree = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CorruptRecordError(record.checkpoint_id, f"payload does not decode: {exc}") from exc
    revive = blobs.needs_revival(body)
    names = record.header.blobs
    if not names:
        return tree, revive
    if fetch is None:
        raise CorruptRecordError(
            record.checkpoint_id, "refers to blobs but no store was given to read them"
        )
    stored = fetch(names)

    def plain(name: str) -> bytes | None:
        # Unsealed when the walk reaches it, so each pack's plaintext is parsed and
        # freed before the next is decompressed: a fresh process then faults in one
        # pack's worth of new pages for them, not all of them (4 MB at 2,000 messages).
        sealed = stored.get(name)
        return None if sealed is None else blobs.unseal(name, sealed, storage)

    tree, in_packs = blobs.resolve(tree, plain, record.checkpoint_id)
    return tree, revive or in_packs


def state_of(tree: Any, revive: bool, ident: str) -> dict[str, Any]:
    """The state from a resolved tree; ``revive``: it holds tags for ``values.from_data``."""
    try:
        state = values.from_data(tree) if revive else tree
    except SerializationError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRecordError(ident, f"payload does not decode: {exc}") from exc
    if type(state) is not dict:
        raise CorruptRecordError(ident, "payload is not a state object")
    return state


# -- the stateless API ---------------------------------------------------------------
def encode(
    header: CheckpointHeader, state: dict[str, Any], storage: StorageConfig | None = None
) -> CheckpointRecord:
    """Encode ``state`` as a self-contained keyframe (large values inline, no blobs).

    The runtime uses :class:`savegame.codec.engine.Encoder`, which writes deltas and
    blobs. ``header.base_id`` and ``header.blobs`` are kept as given: store tests use
    them as labels; a record labelled with a base does not decode (its envelope says
    keyframe), so real keyframes leave them empty.

    Raises:
        SerializationError: naming the path of the first value that is not pure data.
    """
    if type(state) is not dict:
        raise SerializationError(
            "state", f"the state must be a dict, not {type(state).__qualname__}"
        )
    body = values.dumps(state, "state")
    return seal_record(header, body, delta=False, storage=resolve(storage))


def decode(
    record: CheckpointRecord, storage: StorageConfig | None = None, *, fetch: Fetch | None = None
) -> Checkpoint:
    """Verify and decode a keyframe record (``engine.load`` reads deltas through their chain).

    Raises:
        CorruptRecordError: the record fails its check, does not decode, or is a delta.
        EncryptionKeyError: its key id is not in the keyring.
    """
    config = resolve(storage)
    is_delta, body = open_record(record, config)
    if is_delta:
        raise CorruptRecordError(
            record.checkpoint_id,
            f"is a delta against {record.header.base_id}; load it with its chain",
        )
    tree, revive = parse(body, record, fetch, config)
    state = state_of(tree, revive, record.checkpoint_id)
    return Checkpoint(header=reveal_metadata(record.header, config), state=state)


def rewrap(
    record: CheckpointRecord, header: CheckpointHeader, storage: StorageConfig | None = None
) -> CheckpointRecord:
    """The same state under a new header (a stop marker that keeps the last good state).

    A delta stays a delta against the same base (the new record's ``base_id``
    is the old one's, which holds the base state); encrypted and checksummed
    identities are re-sealed for the new checkpoint id.
    """
    config = resolve(storage)
    if record.header.format_version < 2:
        if config.keyring is not None and not config.accept_plaintext:
            raise UnencryptedRecordError(record.checkpoint_id)
        header = replace(header, size=len(record.payload), format_version=1, base_id=None, blobs=())
        return CheckpointRecord(
            header=header, payload=record.payload, checksum=checksum(header, record.payload)
        )
    is_delta, body = open_record(record, config)
    header = replace(header, base_id=record.header.base_id, blobs=record.header.blobs)
    return seal_record(header, body, delta=is_delta, storage=config)


def marker(
    latest: CheckpointRecord,
    status: RunStatus,
    metadata: Mapping[str, Any],
    storage: StorageConfig | None = None,
    *,
    resumable: bool = False,
) -> CheckpointRecord:
    """A checkpoint that only changes the run's status: ``latest``'s state under a new id,
    parented on it (cancelled, compensating, parked as failed ...).

    ``resumable`` keeps ``latest``'s next step (a failed run resumes there); otherwise
    the marker ends the run (``next`` None).
    """
    header = replace(
        latest.header,
        checkpoint_id=new_id(),
        parent_id=latest.checkpoint_id,
        status=status,
        next=latest.header.next if resumable else None,
        created_at=utcnow(),
        metadata=dict(metadata),
    )
    # A rewrap of a delta keeps its base: the new record holds the same patch against it.
    return rewrap(latest, header, storage)

"""Whole records one at a time: the codec's stateless API.

:func:`encode` writes a state as one self-contained keyframe and :func:`decode`
reads one back; :func:`rewrap` puts a stored record's state under a new header and
:func:`marker` makes the checkpoint that only changes a run's status. The runtime
writes deltas and blobs through the storage engine (:mod:`savegame.codec._engine`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from savegame.codec import _refs, _values
from savegame.codec._envelope import (
    Fetch,
    format1_checksum,
    open_record,
    parse,
    seal_record,
    state_of,
)
from savegame.codec._metadata import reveal_metadata
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, SerializationError, UnencryptedRecordError
from savegame.ids import new_id
from savegame.model import Checkpoint, CheckpointHeader, CheckpointRecord, RunStatus, utcnow


def encode(
    header: CheckpointHeader, state: dict[str, Any], storage: StorageConfig | None = None
) -> CheckpointRecord:
    """Encode ``state`` as a self-contained keyframe (large values inline, no new blobs).

    The runtime uses :class:`savegame.codec._engine.Encoder`, which writes deltas and
    blobs. ``header.base_id`` and ``header.blobs`` are kept as given: store tests use
    them as labels; a record labelled with a base does not decode (its envelope says
    keyframe), so real keyframes leave them empty. The workspace files the state
    refers to (a manifest's :class:`~savegame.model.StoredFile` values, blobs stored
    already) are added to ``header.blobs``, as the Encoder lists them: export, retention,
    rekey and verify know a record's blobs by its header only, so a fork's first record
    that left them out was exported without its files and lost them to a prune.

    Raises:
        SerializationError: naming the path of the first value that is not pure data.
    """
    if type(state) is not dict:
        raise SerializationError(
            "state", f"the state must be a dict, not {type(state).__qualname__}"
        )
    config = resolve(storage)
    body = _values.dumps(state, "state")
    files = _files_not_in(header, body, config)
    if files:
        header = replace(header, blobs=(*header.blobs, *files))
    return seal_record(header, body, delta=False, storage=config)


def _files_not_in(header: CheckpointHeader, body: bytes, config: StorageConfig) -> list[str]:
    if _refs.FILE_BYTES not in body:  # no file is named: the walk is skipped
        return []
    return sorted(_refs.files_in(orjson.loads(body), config) - set(header.blobs))


def unlisted_files(
    record: CheckpointRecord, body: bytes, storage: StorageConfig | None = None
) -> list[str]:
    """The workspace files ``record``'s body (as :func:`open_record` returns it) refers to
    that its header does not list, so that export, retention and rekey do not see them: a
    fork's first record written before savegame listed them (``verify`` reports it).

    Raises:
        CorruptRecordError: the body is not JSON.
    """
    try:
        return _files_not_in(record.header, body, resolve(storage))
    except orjson.JSONDecodeError as exc:
        raise CorruptRecordError(record.checkpoint_id, f"payload does not decode: {exc}") from exc


def decode(
    record: CheckpointRecord, storage: StorageConfig | None = None, *, fetch: Fetch | None = None
) -> Checkpoint:
    """Verify and decode a keyframe record (``load_chain`` reads a delta through its chain).

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
            header=header, payload=record.payload, checksum=format1_checksum(header, record.payload)
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

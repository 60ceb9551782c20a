"""Checkpoint records: encode a state into checked bytes and back.

The checksum is BLAKE2b-128 over the header fields that identify the record and
the payload, so a payload copied under another checkpoint's id is detected too.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from savegame.codec import values
from savegame.errors import CorruptRecordError, SerializationError
from savegame.model import FORMAT_VERSION, Checkpoint, CheckpointHeader, CheckpointRecord


def checksum(header: CheckpointHeader, payload: bytes) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{header.run_id}\0{header.checkpoint_id}\0{header.format_version}\0".encode())
    digest.update(payload)
    return digest.hexdigest()


def encode(header: CheckpointHeader, state: dict[str, Any]) -> CheckpointRecord:
    """Encode ``state`` under ``header``.

    Raises:
        SerializationError: naming the path of the first value that is not pure data.
    """
    if type(state) is not dict:
        raise SerializationError(
            "state", f"the state must be a dict, not {type(state).__qualname__}"
        )
    payload = values.dumps(state, "state")
    # Format 1 (plain canonical JSON) until the storage-engine envelope lands.
    header = replace(header, size=len(payload), format_version=1)
    return CheckpointRecord(header=header, payload=payload, checksum=checksum(header, payload))


def decode(record: CheckpointRecord) -> Checkpoint:
    """Verify and decode a stored record.

    Raises:
        CorruptRecordError: the checksum does not match or the payload does not decode.
    """
    header = record.header
    if header.format_version > FORMAT_VERSION:
        raise CorruptRecordError(
            header.checkpoint_id,
            f"format version {header.format_version} is newer than this savegame understands ({FORMAT_VERSION}); upgrade savegame",
        )
    if checksum(header, record.payload) != record.checksum:
        raise CorruptRecordError(header.checkpoint_id, "checksum mismatch")
    try:
        state = values.loads(record.payload)
    except SerializationError:
        raise
    except ValueError as exc:
        raise CorruptRecordError(header.checkpoint_id, f"payload does not decode: {exc}") from exc
    if type(state) is not dict:
        raise CorruptRecordError(header.checkpoint_id, "payload is not a state object")
    return Checkpoint(header=header, state=state)


def rewrap(record: CheckpointRecord, header: CheckpointHeader) -> CheckpointRecord:
    """The same payload under a new header (a failure marker that keeps the last good state)."""
    header = replace(header, size=len(record.payload), format_version=record.header.format_version)
    return CheckpointRecord(
        header=header, payload=record.payload, checksum=checksum(header, record.payload)
    )

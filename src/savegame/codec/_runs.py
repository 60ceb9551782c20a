"""Run rows: their check, their agreement with their head, their error text sealed.

A run row (:class:`~savegame.model.RunInfo`) carries a check over what never changes
after ``create_run`` (:func:`run_checksum`): ``c1:`` and an unkeyed BLAKE2b-128
without a keyring, ``m1:<key id>:`` and a keyed one with. Status, step and head move
with every checkpoint, whose own header is authenticated: :func:`check_head` holds
the row to its head. Under a keyring a row's error text is stored sealed
(:func:`seal_error`), as sensitive metadata is (:mod:`savegame.codec._metadata`).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace

import orjson

from savegame.codec._envelope import micros
from savegame.codec._metadata import (
    SEALED,
    is_sealed,
    reseal_run_metadata,
    reveal_values,
    sealed_keys,
)
from savegame.codec.crypto import Keyring, unbase64
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, EncryptionKeyError, UnauthenticatedRecordError
from savegame.model import CheckpointRecord, RunInfo

_RUN_PLAIN, _RUN_KEYED = "c1:", "m1:"


def _run_covered(info: RunInfo) -> bytes:
    # What never changes after create_run; status, step and head move with every
    # checkpoint (whose own header is authenticated) and are checked against it.
    fields = [
        info.run_id, info.thread_id, info.workflow, info.workflow_ref,
        micros(info.created_at), info.metadata,
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
    if isinstance(error, str) and is_sealed(error):
        kid = error[len(SEALED) :].partition(":")[0]
        if reader.keyring is None:
            raise EncryptionKeyError(kid, label)
        reader.keyring.key(kid, label)  # a missing key is an error here, not a sealed text
        error = _reveal_error(info.run_id, error, reader.keyring)
    metadata = reseal_run_metadata(info.run_id, info.metadata, reader, writer)
    fresh = replace(info, metadata=metadata, error=seal_error(info.run_id, error, writer))
    return replace(fresh, checksum=run_checksum(fresh, writer))


def seal_error(run_id: str, text: str | None, storage: StorageConfig | None) -> str | None:
    """A run row's error text as stored: sealed under a keyring (bound to the run).

    An error repeats what failed (an in-doubt call's arguments, a step's exception,
    a rejection's reason), so with encryption configured it is never stored in the clear.
    """
    if text is None:
        return None  # every step's checkpoint: no configuration lookup for nothing
    ring = resolve(storage).keyring
    if ring is None or is_sealed(text):
        return text
    kid, sealed = ring.encrypt(text.encode(), f"run-error\0{run_id}".encode())
    return f"{SEALED}{kid}:{base64.b64encode(sealed).decode('ascii')}"


def _reveal_error(run_id: str, text: str | None, ring: Keyring) -> str | None:
    if text is None or not is_sealed(text):
        return text
    kid, _, body = text[len(SEALED) :].partition(":")
    if kid not in ring.keys:
        return text  # as for metadata: one old run must not make a listing fail
    aad = f"run-error\0{run_id}".encode()
    label = f"run {run_id} error"
    plain = ring.decrypt(kid, unbase64(body, label), aad, label)
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise CorruptRecordError(label, "its error text is not text") from None


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
    if not sealed_keys(info.metadata) and not is_sealed(info.error):
        return info
    if ring is None:
        return info
    revealed = reveal_values(
        info.run_id, info.metadata, ring, f"run {info.run_id}", missing_keys_ok=True
    )
    return replace(info, metadata=revealed, error=_reveal_error(info.run_id, info.error, ring))


def _unsealed_error(info: RunInfo) -> RunInfo:
    # Under a keyring every error text is written sealed: a plain one was put there by
    # someone else, and must not read as savegame's ("paid; run savegame resolve --done").
    if info.error is None or is_sealed(info.error):
        return info
    return replace(info, error=f"(not written by savegame, not authenticated) {info.error}")

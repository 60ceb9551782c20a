"""Sensitive metadata: values in a header's or a run row's metadata, sealed at rest.

With a keyring, the values of the keys in ``StorageConfig.sensitive_metadata`` and
:data:`ALWAYS_SEALED` are stored as ``"$sg:enc:<key id>:<base64>"``: the value's
JSON encrypted under the active key, bound to the run and the key name as
associated data, so a sealed value moved to another run or key fails to open.
A run row's error text is sealed under the same marker
(:func:`savegame.codec._runs.seal_error`). Readers reveal what their keyring can.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from savegame.codec.crypto import Keyring, unbase64
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import (
    ConfigurationError,
    CorruptRecordError,
    EncryptionKeyError,
    SerializationError,
)
from savegame.model import CheckpointHeader

ALWAYS_SEALED = frozenset({"error", "reason"})
"""Metadata keys sealed whenever a keyring is configured: an error message repeats what
failed (a call's arguments, a rejection's reason), which may be an encrypted value, and
a fork's reason is what a person wrote about the state they edited."""
SEALED = "$sg:enc:"
"""How a sealed value (a metadata value or a run row's error text) starts."""


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(SEALED)


def refuse_reserved(metadata: Mapping[str, Any], where: str = "metadata") -> None:
    """Refuse a metadata value that would read as a sealed one (and fail to decrypt).

    Raises:
        SerializationError: naming the key whose value starts with ``$sg:enc:``.
    """
    for key, value in metadata.items():
        if is_sealed(value):
            raise SerializationError(
                f"{where}[{key!r}]",
                f"a metadata value may not start with {SEALED!r}, which marks encrypted values",
            )


def sealed_keys(metadata: Mapping[str, Any]) -> list[str]:
    return [k for k, v in metadata.items() if is_sealed(v)]


def _seal_values(
    run_id: str, metadata: Mapping[str, Any], keys: frozenset[str], ring: Keyring
) -> dict[str, Any]:
    """``metadata`` with the values of ``keys`` encrypted, bound to the run and the key name."""
    meta = dict(metadata)
    for key in keys & meta.keys():
        value = meta[key]
        if is_sealed(value):
            continue  # carried over from an earlier record of the same run
        kid, sealed = ring.encrypt(orjson.dumps(value), f"meta\0{run_id}\0{key}".encode())
        meta[key] = f"{SEALED}{kid}:{base64.b64encode(sealed).decode('ascii')}"
    return meta


def reveal_values(
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
    for key in sealed_keys(metadata):
        kid, _, body = meta[key][len(SEALED) :].partition(":")
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
    sealed = sealed_keys(metadata)
    revealed = dict(metadata)
    if sealed:
        if reader.keyring is None:
            kid = metadata[sealed[0]][len(SEALED) :].partition(":")[0]
            raise EncryptionKeyError(kid, f"{label} metadata {sealed[0]!r}")
        revealed = reveal_values(run_id, metadata, reader.keyring, label)
    keys = writer.sensitive_metadata | ALWAYS_SEALED | set(sealed)
    return _seal_values(run_id, revealed, frozenset(keys), writer.keyring)


def reveal_metadata(
    header: CheckpointHeader, storage: StorageConfig | None = None
) -> CheckpointHeader:
    """The header with sensitive metadata decrypted (left sealed when no keyring is given)."""
    if not sealed_keys(header.metadata):
        return header  # the common case: no keyring lookup per header (history lists thousands)
    ring = resolve(storage).keyring
    if ring is None:
        return header
    return replace(
        header,
        metadata=reveal_values(header.run_id, header.metadata, ring, header.checkpoint_id),
    )

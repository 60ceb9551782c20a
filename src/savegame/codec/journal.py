"""Journal entries: encode call arguments and results, encrypt them at rest, check integrity.

``encode_value`` gives canonical plaintext bytes (what request digests and
approval checks compare). ``sealed`` is applied on every journal write: with a
keyring it encrypts ``arguments`` and ``result`` (each bound to the entry's
run, request id and field as associated data) unless they are sealed already,
then computes the checksum over the stored bytes. ``opened`` is the inverse
for readers. A stored value is ``b"SGE\\x01" + key-id length + key id + nonce
+ ciphertext``; canonical JSON never starts with ``S``, so plain format-1
values are told apart without a flag.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from savegame.codec import values
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, EncryptionKeyError, UnencryptedRecordError
from savegame.model import EffectRecord

_MAGIC = b"SGE\x01"


def effect_checksum(effect: EffectRecord) -> str:
    digest = hashlib.blake2b(digest_size=16)
    identity = f"{effect.run_id}\0{effect.request_id}\0{effect.kind.value}\0{effect.name}\0{effect.status.value}\0"
    digest.update(identity.encode())
    digest.update(effect.arguments)
    digest.update(b"\0" if effect.result is None else b"\1" + effect.result)
    return digest.hexdigest()


def _label(effect: EffectRecord) -> str:
    return f"{effect.run_id}/{effect.request_id}"


def _aad(effect: EffectRecord, field: str) -> bytes:
    return f"journal\0{effect.run_id}\0{effect.request_id}\0{field}".encode()


def is_sealed(data: bytes | None) -> bool:
    return data is not None and data[:4] == _MAGIC


def _seal(effect: EffectRecord, field: str, data: bytes, storage: StorageConfig) -> bytes:
    assert storage.keyring is not None
    if is_sealed(data):
        return data
    kid, sealed_ = storage.keyring.encrypt(data, _aad(effect, field))
    encoded_kid = kid.encode()
    return _MAGIC + bytes([len(encoded_kid)]) + encoded_kid + sealed_


def _open(effect: EffectRecord, field: str, data: bytes, storage: StorageConfig) -> bytes:
    if not is_sealed(data):
        if storage.keyring is not None and not storage.accept_plaintext:
            raise UnencryptedRecordError(_label(effect))
        return data
    end = 5 + data[4]
    kid = data[5:end].decode()
    if storage.keyring is None:
        raise EncryptionKeyError(kid, _label(effect))
    return storage.keyring.decrypt(kid, data[end:], _aad(effect, field), _label(effect))


def sealed(effect: EffectRecord, storage: StorageConfig | None = None) -> EffectRecord:
    """The entry as stored: values encrypted when a keyring is configured, checksum filled in."""
    config = resolve(storage)
    if config.keyring is not None:
        effect = replace(
            effect,
            arguments=_seal(effect, "arguments", effect.arguments, config),
            result=None
            if effect.result is None
            else _seal(effect, "result", effect.result, config),
        )
    return replace(effect, checksum=effect_checksum(effect))


def opened(effect: EffectRecord, storage: StorageConfig | None = None) -> EffectRecord:
    """The entry with plaintext ``arguments`` and ``result`` (checksum left as stored).

    Raises:
        CorruptRecordError: a value fails authentication, or is plaintext while encryption is required.
        EncryptionKeyError: a value's key id is not in the keyring.
    """
    config = resolve(storage)
    if config.keyring is None and not is_sealed(effect.arguments) and not is_sealed(effect.result):
        return effect
    return replace(
        effect,
        arguments=_open(effect, "arguments", effect.arguments, config),
        result=None if effect.result is None else _open(effect, "result", effect.result, config),
    )


def verify(effect: EffectRecord) -> EffectRecord:
    if effect_checksum(effect) != effect.checksum:
        raise CorruptRecordError(_label(effect), "journal entry checksum mismatch")
    return effect


def encode_value(value: Any, path: str) -> bytes:
    return values.dumps(value, path)


def decode_value(data: bytes | None) -> Any:
    """Decode plaintext bytes (pass stored entries through :func:`opened` first)."""
    if data is None:
        return None
    if is_sealed(data):
        raise CorruptRecordError(
            "journal value", "is encrypted; open the entry with its keyring first"
        )
    return values.loads(data)

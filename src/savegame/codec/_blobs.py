"""A blob's name and stored bytes; which blobs a store is known to hold.

A blob is a large value (:mod:`savegame.codec._refs`) or a pack
(:mod:`savegame.codec._packs`), stored once under its name however often it recurs.

Digest: BLAKE2b-256 (hex) of the plaintext; with encryption on it is keyed with
a key derived from the active encryption key (``Keyring.digest_key``), so the
name of an encrypted blob does not reveal whether two stores, or two keys, hold
the same text. Dedup then works per key, which is the same scope as the data.

Stored blob bytes: ``b"SGB"`` + version (1) + flags (1: zstd, 2: AES-GCM,
4: the zstd frame carries a content checksum, 8: bound) + key-id length + key
id + [bound: 4 bytes] + body. An encrypted blob authenticates its digest as
associated data. A plain one is bound to its name: a CRC-32 of the name and
the stored body, checked on every read, so a damaged blob, or a sound one
stored under another blob's name (rows swapped), is refused where it is read.
Hashing the plaintext against its digest instead cost a load of 2,000
messages about as much as decompressing them (3.8 ms for 3.3 MB here); the CRC
of the compressed body costs 0.26 ms per 1.5 MB. ``savegame verify`` still
recomputes every digest (``unseal_blob(full=True)``). Plain blobs written before
the binding existed (no flag 8) are checked against their digest on every read.
"""

from __future__ import annotations

import hashlib
import weakref
import zlib
from collections.abc import Sequence
from typing import Any

from savegame.codec import _compress
from savegame.codec.crypto import key_id
from savegame.codec.storage import StorageConfig
from savegame.errors import CorruptRecordError, EncryptionKeyError, UnencryptedRecordError

_MAGIC = b"SGB\x01"
_ZSTD, _AEAD, _FRAME_CHECKED, _BOUND = 1, 2, 4, 8


def blob_digest(data: bytes, storage: StorageConfig) -> str:
    key = storage.keyring.digest_key() if storage.keyring is not None else b""
    return hashlib.blake2b(data, digest_size=32, key=key).hexdigest()


def seal_blob(name: str, data: bytes, storage: StorageConfig) -> bytes:
    """The stored form of a blob: maybe compressed, maybe encrypted."""
    flags, body = 0, data
    if storage.compress_threshold and len(data) >= storage.compress_threshold:
        # Encrypted blobs are authenticated by AES-GCM; only plain ones need the checksum.
        checked = storage.keyring is None
        packed = _compress.compress(data, checksum=checked)
        if len(packed) < len(data):
            flags, body = flags | _ZSTD | (_FRAME_CHECKED if checked else 0), packed
    kid = b""
    if storage.keyring is not None:
        flags |= _AEAD
        kid = storage.keyring.active.encode()
        prefix = _MAGIC + bytes([flags, len(kid)]) + kid
        _, body = storage.keyring.encrypt(body, prefix + name.encode())
        return prefix + body
    return _MAGIC + bytes([flags | _BOUND, 0]) + _binding(name, body) + body


def _binding(name: str, body: bytes) -> bytes:
    return zlib.crc32(body, zlib.crc32(name.encode())).to_bytes(4, "big")


def unseal_blob(
    name: str,
    stored: bytes,
    storage: StorageConfig,
    *,
    full: bool = False,
    limit: int | None = None,
) -> bytes:
    """Raises CorruptRecordError (named ``blob <digest>``) when the bytes fail their check.

    ``full``: recompute a plain blob's digest even when its frame checksum held.
    ``limit``: the most bytes its content may unpack to (refused before allocating).
    """
    label = f"blob {name}"
    if stored[:4] != _MAGIC or len(stored) < 6:
        raise CorruptRecordError(label, "not a savegame blob")
    flags, kid_len = stored[4], stored[5]
    prefix_end = 6 + kid_len
    kid = key_id(stored[6:prefix_end], label)
    body = stored[prefix_end:]
    if flags & _AEAD:
        if storage.keyring is None:
            raise EncryptionKeyError(kid, label)
        body = storage.keyring.decrypt(kid, body, stored[:prefix_end] + name.encode(), label)
    elif storage.keyring is not None and not storage.accept_plaintext:
        raise UnencryptedRecordError(label)
    elif flags & _BOUND:
        tag, body = body[:4], body[4:]
        if _binding(name, body) != tag:
            raise CorruptRecordError(label, "its bytes are damaged, or another blob's")
    if flags & _ZSTD:
        try:
            body = _compress.decompress(body, limit=limit)
        except Exception as exc:
            raise CorruptRecordError(label, f"does not decompress: {exc}") from exc
    if flags & _AEAD or (flags & _BOUND and not full):
        return body
    # Plain blobs are named by the unkeyed digest of their bytes: check it.
    if hashlib.blake2b(body, digest_size=32).hexdigest() != name:
        raise CorruptRecordError(label, "content does not match its digest")
    return body


class KnownBlobs:
    """Digests known to be stored, per store object, for this process.

    Filled only after a checkpoint that carried them committed, so a failed
    write never leaves a digest marked present that is not. Retention that
    deletes unreferenced blobs in this process should call :meth:`forget`.
    """

    def __init__(self) -> None:
        self._by_store: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._fallback: dict[int, tuple[Any, set[str]]] = {}

    def _set(self, store: Any) -> set[str]:
        try:
            return self._by_store.setdefault(store, set())
        except TypeError:  # not weak-referenceable: keep the store alive with its set
            return self._fallback.setdefault(id(store), (store, set()))[1]

    def present(self, store: Any, digests: Sequence[str]) -> set[str]:
        known = self._set(store)
        return {d for d in digests if d in known}

    def add(self, store: Any, digests: Sequence[str]) -> None:
        if digests:
            self._set(store).update(digests)

    def forget(self, store: Any) -> None:
        self._set(store).clear()


known_blobs = KnownBlobs()

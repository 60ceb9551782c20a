"""Encryption at rest: AES-256-GCM under a keyring of named keys.

One key is *active* (used for every new write); the others only read, which is
how keys rotate: add a new key in front, keep the old ones until ``rekey`` has
rewritten what they protect. Every sealed value names its key id, so a missing
key is reported by name rather than as a damaged record.

Each encryption draws a fresh random 96-bit nonce. At the 2**32-messages-per-key
bound NIST gives for random nonces, rotate: a process writing 1,000 checkpoints
a second would need more than a century to get there.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from savegame.errors import ConfigurationError, CorruptRecordError, EncryptionKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12


@functools.lru_cache(maxsize=64)
def _aead(key: bytes) -> AESGCM:
    # Imported here: `cryptography` costs about 25 ms to import, which every CLI
    # command and worker paid even with no key configured.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def key_id(raw: bytes, record_id: str) -> str:
    """A stored key id: bytes that do not decode are damage, not an unknown key."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise CorruptRecordError(record_id, "its key id is not text") from None


def unbase64(text: str, record_id: str) -> bytes:
    """A stored base64 value (a sealed metadata value or error text)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CorruptRecordError(record_id, "its sealed value is not base64") from None


def new_key() -> str:
    """A fresh random key, base64, ready for ``SAVEGAME_KEYS="kid:<key>"``."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


@dataclass(frozen=True, slots=True)
class Keyring:
    """Encryption keys by key id; ``active`` encrypts, every key decrypts.

    Example::

        Keyring({"2025-06": new_key_bytes, "2024-01": old_key_bytes}, active="2025-06")
    """

    keys: Mapping[str, bytes]
    """Key id -> 32 raw key bytes (AES-256)."""
    active: str
    """The key id new records are written with."""
    _digest_keys: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    _mac_keys: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.active not in self.keys:
            raise ConfigurationError(f"active key id {self.active!r} is not in the keyring")
        for kid, key in self.keys.items():
            if not kid or len(kid.encode()) > 255 or any(c in kid for c in ",: \t\n"):
                raise ConfigurationError(
                    f"key id {kid!r} must be 1-255 bytes without commas, colons or spaces"
                )
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"key {kid!r} is {len(key)} bytes; AES-256 needs {KEY_BYTES}"
                )

    @classmethod
    def parse(cls, spec: str) -> Keyring:
        """``"kid1:base64key,kid2:base64key"``; the first key is active."""
        keys: dict[str, bytes] = {}
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            kid, sep, encoded = item.partition(":")
            if not sep:
                raise ConfigurationError(
                    f"key entry {kid!r} must look like kid:base64key (SAVEGAME_KEYS)"
                )
            if kid.strip() in keys:
                # The later one would silently win, and the first (active) one not be it.
                raise ConfigurationError(f"key id {kid.strip()!r} appears twice (SAVEGAME_KEYS)")
            try:
                keys[kid.strip()] = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise ConfigurationError(f"key {kid!r} is not valid base64") from None
        if not keys:
            raise ConfigurationError("the keyring is empty (SAVEGAME_KEYS)")
        return cls(keys, active=next(iter(keys)))

    def key(self, kid: str, record_id: str) -> bytes:
        try:
            return self.keys[kid]
        except KeyError:
            raise EncryptionKeyError(kid, record_id) from None

    def encrypt(self, data: bytes, aad: bytes) -> tuple[str, bytes]:
        """(active key id, nonce + ciphertext + tag)."""
        nonce = os.urandom(NONCE_BYTES)
        return self.active, nonce + _aead(self.keys[self.active]).encrypt(nonce, data, aad)

    def decrypt(self, kid: str, sealed: bytes, aad: bytes, record_id: str) -> bytes:
        """Raises EncryptionKeyError (unknown key id) or CorruptRecordError (failed authentication)."""
        from cryptography.exceptions import InvalidTag  # loaded by _aead; see there

        key = self.key(kid, record_id)
        try:
            return _aead(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except InvalidTag:
            raise CorruptRecordError(
                record_id,
                f"authentication failed under key {kid!r}: the record was altered, "
                f"or key {kid!r} is not the key it was written with",
            ) from None

    def digest_key(self, kid: str | None = None) -> bytes:
        """A key for blob digests derived from key ``kid`` (default: the active one).

        Digests of encrypted blobs are keyed so that equal plaintexts cannot be
        recognised by their names without the key.
        """
        kid = kid or self.active
        derived = self._digest_keys.get(kid)
        if derived is None:
            derived = hashlib.blake2b(
                self.keys[kid], digest_size=32, person=b"savegame-blobid"
            ).digest()
            self._digest_keys[kid] = derived
        return derived

    def mac(self, data: bytes, kid: str | None = None, record_id: str = "record") -> str:
        """A keyed BLAKE2b-128 tag of ``data`` under a key derived from key ``kid``
        (default: the active one), hex.

        It authenticates what is not encrypted but decides what runs (journal
        entries: status, names, decisions), so that someone who can write to the
        database but holds no key cannot change it unnoticed.

        Raises:
            EncryptionKeyError: ``kid`` is not in the keyring.
        """
        kid = kid or self.active
        derived = self._mac_keys.get(kid)
        if derived is None:
            derived = hashlib.blake2b(
                self.key(kid, record_id), digest_size=32, person=b"savegame-mac"
            ).digest()
            self._mac_keys[kid] = derived
        return hashlib.blake2b(data, digest_size=16, key=derived).hexdigest()

    def check_mac(self, data: bytes, kid: str, tag: str, record_id: str) -> bool:
        """Whether ``tag`` is :meth:`mac` of ``data`` under ``kid``, in constant time."""
        return hmac.compare_digest(self.mac(data, kid, record_id), tag)

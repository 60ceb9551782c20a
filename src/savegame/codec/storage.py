"""How checkpoints are stored: keyframe cadence, blob and compression thresholds, keys.

``StorageConfig`` is passed as ``storage=`` to ``run``, ``resume``,
``get_checkpoint`` ...; without it the environment decides:

``SAVEGAME_KEYS``
    ``"kid1:<base64 32-byte key>,kid2:<...>"``: encrypt with AES-256-GCM. The
    first key is active (writes); the others still read (rotation). Make a key
    with ``python -c "import savegame.codec.crypto as c; print(c.new_key())"``.
``SAVEGAME_SENSITIVE_METADATA``
    comma-separated metadata keys whose values are encrypted in headers
    (requires keys). Other metadata stays plain so history stays filterable.
``SAVEGAME_KEYFRAME_EVERY``, ``SAVEGAME_BLOB_THRESHOLD``, ``SAVEGAME_COMPRESS_THRESHOLD``, ``SAVEGAME_PACK_BYTES``
    integers overriding the defaults below.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from savegame.codec.crypto import Keyring
from savegame.errors import ConfigurationError

INLINE_MAX = 16 * 1024
"""Values up to this size stay inline in deltas and packs whatever ``blob_threshold`` says:
a new list item is written once anyway, and as a separate blob it cost a row and a zstd
frame on every load."""


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Storage-engine settings; the defaults suit agent states from KBs to MBs."""

    keyframe_every: int = 32
    """At most this many checkpoints per chain (a keyframe, then deltas): bounds a load to K records."""
    blob_threshold: int = 1024
    """In a keyframe, strings and bytes longer than this (characters / bytes) outside lists are
    stored once as content-addressed blobs; 0 turns blobs (and packs) off. In deltas and in
    lists, only those longer than :attr:`inline_max` are: there each value is written once
    anyway, inside a record or pack compressed as a whole."""
    compress_threshold: int = 2048
    """Payloads and blobs of at least this many bytes are zstd-compressed; 0 turns compression off."""
    pack_bytes: int = 32 * 1024
    """A keyframe stores a list's items in packs of about this many encoded bytes, each a blob
    written once (:mod:`savegame.codec._packs`); 0 turns packs off."""
    keyring: Keyring | None = None
    """Encrypt payloads, blobs and journal values; a plaintext record is then refused."""
    sensitive_metadata: frozenset[str] = frozenset()
    """Metadata keys whose values are encrypted in the header (needs a keyring)."""
    accept_plaintext: bool = False
    """With a keyring, still read unencrypted records (only for migrating old data with ``rekey``)."""

    def __post_init__(self) -> None:
        if self.keyframe_every < 1:
            raise ConfigurationError("keyframe_every must be at least 1")
        if self.blob_threshold < 0 or self.compress_threshold < 0 or self.pack_bytes < 0:
            raise ConfigurationError("thresholds must be >= 0 (0 turns the feature off)")
        if self.sensitive_metadata and self.keyring is None:
            raise ConfigurationError("sensitive_metadata needs a keyring to encrypt with")
        object.__setattr__(self, "sensitive_metadata", frozenset(self.sensitive_metadata))

    @property
    def inline_max(self) -> int:
        """Longest string or bytes kept inline in a delta or a pack (0: blobs are off)."""
        if self.blob_threshold <= 0:
            return 0
        return max(self.blob_threshold, INLINE_MAX)

    @property
    def encrypted(self) -> bool:
        return self.keyring is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StorageConfig:
        env = os.environ if environ is None else environ
        spec = env.get("SAVEGAME_KEYS", "").strip()
        sensitive = frozenset(
            k.strip() for k in env.get("SAVEGAME_SENSITIVE_METADATA", "").split(",") if k.strip()
        )
        # A variable that is not set leaves the field's default: one place for each.
        numbers: dict[str, Any] = {
            field: _int(env[name], name)
            for field, name in _INT_VARIABLES.items()
            if env.get(name, "").strip()
        }
        config = cls(keyring=Keyring.parse(spec) if spec else None, sensitive_metadata=sensitive)
        return replace(config, **numbers)


_INT_VARIABLES = {
    "keyframe_every": "SAVEGAME_KEYFRAME_EVERY",
    "blob_threshold": "SAVEGAME_BLOB_THRESHOLD",
    "compress_threshold": "SAVEGAME_COMPRESS_THRESHOLD",
    "pack_bytes": "SAVEGAME_PACK_BYTES",
}


def _int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, not {raw!r}") from None


_env_cache: dict[tuple[str, ...], StorageConfig] = {}
_ENV_KEYS = ("SAVEGAME_KEYS", "SAVEGAME_SENSITIVE_METADATA", *_INT_VARIABLES.values())


def resolve(storage: StorageConfig | None) -> StorageConfig:
    """``storage``, or the configuration the environment describes (parsed once per value)."""
    if storage is not None:
        return storage
    key = tuple(os.environ.get(name, "") for name in _ENV_KEYS)
    found = _env_cache.get(key)
    if found is None:
        found = _env_cache[key] = StorageConfig.from_env()
    return found

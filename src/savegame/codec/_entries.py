"""Journal entries: encode call arguments and results, encrypt them at rest, check integrity.

``encode_value`` gives canonical plaintext bytes (what replay checks compare).
``seal_entry`` is applied on every journal write: with a keyring it encrypts
``arguments``, ``result`` and ``error`` (each bound to the entry's run, request
id and field as associated data) unless they are sealed already, then computes
the entry's check over everything stored but its timestamps. ``open_entry`` is the
inverse for readers, and it checks first: no entry is used unverified.

A stored value is ``b"SGE\\x01" + key-id length + key id + nonce + ciphertext``;
canonical JSON never starts with ``S``, so plain values are told apart without
a flag. A sealed error text is ``"$sg:enc:<key id>:<base64>"``. A plaintext value
may be a zstd frame of its canonical JSON (``encode_value(compress_from=...)``;
JSON never starts with the frame's magic ``(\\xb5/\\xfd``), sealed like any other.

The check (``EffectRecord.checksum``):

* ``m2:<key id>:<hex>``: with a keyring, a keyed BLAKE2b-128 (``Keyring.mac``)
  over identity, kind, name, position, status, error, metadata, arguments and
  result. Status, decisions and the tool flags in metadata (``compensate``) are
  not encrypted but decide what runs, so someone who can write to the database
  but holds no key cannot change them unnoticed.
* ``c2:<hex>``: the same fields under an unkeyed BLAKE2b-128, without a keyring:
  accidental damage is caught; anyone can recompute it, so with a keyring it
  is refused.
* 32 hex digits: format 1 (identity, status, arguments and result only), still
  read without a keyring; with one, refused until ``savegame rekey`` rewrites it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from savegame.codec import _byvalue, _compress, _values
from savegame.codec.crypto import key_id, unbase64
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import (
    CorruptRecordError,
    EncryptionKeyError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
)
from savegame.model import EffectRecord, evolve

_MAGIC = b"SGE\x01"
_ZSTD = b"\x28\xb5\x2f\xfd"
_TEXT = "$sg:enc:"
_PLAIN2, _KEYED2 = "c2:", "m2:"


def _legacy_checksum(effect: EffectRecord) -> str:
    """Format 1's check, kept for reading entries written before format 2."""
    digest = hashlib.blake2b(digest_size=16)
    identity = f"{effect.run_id}\0{effect.request_id}\0{effect.kind.value}\0{effect.name}\0{effect.status.value}\0"
    digest.update(identity.encode())
    digest.update(effect.arguments)
    digest.update(b"\0" if effect.result is None else b"\1" + effect.result)
    return digest.hexdigest()


def _covered(effect: EffectRecord) -> bytes:
    """What the check covers: every stored field but the timestamps (stores set those)."""
    # ``_value_``, the member's value as Enum stores it: ``.value`` is a Python-level
    # property on 3.11 (two calls a member, every journal write seals its entries).
    head = orjson.dumps(
        [
            "savegame-effect-2", effect.run_id, effect.request_id, effect.kind._value_,
            effect.name, effect.step, effect.node, effect.call_index, effect.status._value_,
            effect.error, effect.metadata,
        ],
        option=orjson.OPT_SORT_KEYS,
    )  # fmt: skip
    # Each part after its length, joined once: a helper per part copied each value at
    # its ``+`` and again at the next (every journal write seals its entries).
    arguments, result = effect.arguments, effect.result
    parts = [len(head).to_bytes(8, "big"), head, len(arguments).to_bytes(8, "big"), arguments]
    if result is None:
        parts.append(b"\0")
    else:
        parts += (b"\1", len(result).to_bytes(8, "big"), result)
    return b"".join(parts)


def entry_checksum(effect: EffectRecord, storage: StorageConfig | None = None) -> str:
    """The check ``seal_entry`` stores: keyed under the active key when a keyring is set."""
    ring = resolve(storage).keyring
    if ring is None:
        return _PLAIN2 + hashlib.blake2b(_covered(effect), digest_size=16).hexdigest()
    return f"{_KEYED2}{ring.active}:{ring.mac(_covered(effect))}"


def _label(effect: EffectRecord) -> str:
    return f"{effect.run_id}/{effect.request_id}"


def _aad(effect: EffectRecord, field: str) -> bytes:
    return f"journal\0{effect.run_id}\0{effect.request_id}\0{field}".encode()


def _is_sealed(data: bytes | None) -> bool:
    return data is not None and data[:4] == _MAGIC


def _seal(effect: EffectRecord, field: str, data: bytes, storage: StorageConfig) -> bytes:
    assert storage.keyring is not None
    if _is_sealed(data):
        return data
    kid, sealed_ = storage.keyring.encrypt(data, _aad(effect, field))
    encoded_kid = kid.encode()
    return _MAGIC + bytes([len(encoded_kid)]) + encoded_kid + sealed_


def _open(effect: EffectRecord, field: str, data: bytes, storage: StorageConfig) -> bytes:
    if not _is_sealed(data):
        if storage.keyring is not None and not storage.accept_plaintext:
            raise UnencryptedRecordError(_label(effect))
        return data
    end = 5 + data[4]
    kid = key_id(data[5:end], _label(effect))
    if storage.keyring is None:
        raise EncryptionKeyError(kid, _label(effect))
    return storage.keyring.decrypt(kid, data[end:], _aad(effect, field), _label(effect))


def _seal_text(effect: EffectRecord, text: str | None, storage: StorageConfig) -> str | None:
    # An error message repeats what the call was given (`send_card(card='4242...')`):
    # with a keyring it is sealed like the arguments, never stored as plaintext.
    if text is None or storage.keyring is None or text.startswith(_TEXT):
        return text
    kid, sealed_ = storage.keyring.encrypt(text.encode(), _aad(effect, "error"))
    return f"{_TEXT}{kid}:{base64.b64encode(sealed_).decode('ascii')}"


def _open_text(effect: EffectRecord, text: str | None, storage: StorageConfig) -> str | None:
    if text is None or not text.startswith(_TEXT):
        return text
    kid, _, body = text[len(_TEXT) :].partition(":")
    if storage.keyring is None:
        raise EncryptionKeyError(kid, _label(effect))
    sealed_ = unbase64(body, _label(effect))
    plain = storage.keyring.decrypt(kid, sealed_, _aad(effect, "error"), _label(effect))
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise CorruptRecordError(_label(effect), "its error text is not text") from None


def seal_entry(effect: EffectRecord, storage: StorageConfig | None = None) -> EffectRecord:
    """The entry as stored: values encrypted when a keyring is configured, check filled in."""
    config = resolve(storage)
    if config.keyring is not None:
        effect = evolve(
            effect,
            arguments=_seal(effect, "arguments", effect.arguments, config),
            result=None
            if effect.result is None
            else _seal(effect, "result", effect.result, config),
            error=_seal_text(effect, effect.error, config),
        )
    # evolve: every journal write seals its entries, and replace() cost twice as much.
    return evolve(effect, checksum=entry_checksum(effect, config))


def verify_entry(effect: EffectRecord, storage: StorageConfig | None = None) -> EffectRecord:
    """``effect`` if its check holds; with a keyring, only a keyed check counts.

    Raises:
        CorruptRecordError: the check fails (a field was changed), or is missing.
        UnauthenticatedRecordError: with a keyring, the entry carries an unkeyed check.
        EncryptionKeyError: the check's key id is not in the keyring.
    """
    config = resolve(storage)
    ring = config.keyring
    strict = ring is not None and not config.accept_plaintext
    check = effect.checksum
    try:
        covered = _covered(effect)
    except (TypeError, ValueError) as exc:  # a field of a type savegame never writes
        raise CorruptRecordError(_label(effect), f"journal entry does not encode: {exc}") from None
    if not isinstance(check, str):
        raise CorruptRecordError(_label(effect), "journal entry has no checksum")
    if check.startswith(_KEYED2):
        kid, _, tag = check[len(_KEYED2) :].partition(":")
        if ring is None:
            raise EncryptionKeyError(kid, _label(effect))
        if ring.check_mac(covered, kid, tag, _label(effect)):
            return effect
    elif strict:
        if not _is_sealed(effect.arguments):
            raise UnencryptedRecordError(_label(effect))
        raise UnauthenticatedRecordError(_label(effect), "journal entry with an unkeyed check")
    elif check.startswith(_PLAIN2):
        if hashlib.blake2b(covered, digest_size=16).hexdigest() == check[3:]:
            return effect
    else:
        try:
            if _legacy_checksum(effect) == check:
                return effect
        except (TypeError, AttributeError, ValueError):
            pass  # not what format 1 wrote either
    raise CorruptRecordError(_label(effect), "journal entry checksum mismatch")


def open_entry(effect: EffectRecord, storage: StorageConfig | None = None) -> EffectRecord:
    """The entry, verified, with plaintext ``arguments``, ``result`` and ``error``
    (checksum left as stored).

    Raises:
        CorruptRecordError: the check fails, a value fails authentication, or is plaintext
            while encryption is required.
        EncryptionKeyError: a value's key id is not in the keyring.
    """
    config = resolve(storage)
    verify_entry(effect, config)
    if (
        config.keyring is None
        and not _is_sealed(effect.arguments)
        and not _is_sealed(effect.result)
        and not (effect.error or "").startswith(_TEXT)
    ):
        return effect
    return replace(
        effect,
        arguments=_open(effect, "arguments", effect.arguments, config),
        result=None if effect.result is None else _open(effect, "result", effect.result, config),
        error=_open_text(effect, effect.error, config),
    )


def encode_value(
    value: Any,
    path: str,
    *,
    compress_from: int = 0,
    seen: _byvalue.Seen | Mapping[str, _byvalue.Seen] | None = None,
) -> bytes:
    """Canonical JSON of ``value``; with ``compress_from`` > 0, a value of at least that
    many bytes is a zstd frame of it instead, where that is smaller. A journal row is not
    compressed as a whole, as a checkpoint record is: a long value is compressed alone.

    ``seen``: a ``by_value`` encoder's knowledge of a list (``Encoder.seen``); a list
    ``value`` then reuses the trees of the items it shares with it (the same objects,
    printing the same), as the encoder does from step to step. For a dict ``value``, that
    knowledge by key: each of its lists known there is encoded so (a LangGraph subgraph's
    input, ``{"messages": [every message of the thread]}``). The bytes are the same."""
    data = _listed(value, seen) if seen else None
    if data is None:
        data = _values.dumps(value, path)
    if 0 < compress_from <= len(data):
        # No frame checksum: the entry's check covers these bytes.
        packed = _compress.compress(data, level=_compress.RECORD_LEVEL)
        if len(packed) < len(data):
            return packed
    return data


def _listed(value: Any, seen: _byvalue.Seen | Mapping[str, _byvalue.Seen]) -> bytes | None:
    """:func:`_values.dumps` of ``value`` by way of ``seen``; None where it does not apply
    or refuses (the caller's own call then names the path)."""
    tree: Any
    try:
        if isinstance(seen, _byvalue.Seen):
            if type(value) is not list:
                return None
            tree, _ = _byvalue.encode_list(value, _values.MAX_DEPTH, seen)
        elif type(value) is dict:
            tree = _byvalue.encode_dict(value, _values.MAX_DEPTH, lambda key, _: seen.get(key))
        else:
            return None
        return None if tree is None else orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
    except (_values.Unsaveable, orjson.JSONEncodeError, RecursionError):
        return None


def decode_value(data: bytes | None) -> Any:
    """Decode plaintext bytes (pass stored entries through :func:`open_entry` first)."""
    if data is None:
        return None
    if _is_sealed(data):
        raise CorruptRecordError(
            "journal value", "is encrypted; open the entry with its keyring first"
        )
    if data[:4] == _ZSTD:
        try:
            data = _compress.decompress(data)
        except Exception as exc:
            raise CorruptRecordError("journal value", f"does not decompress: {exc}") from exc
    return _values.loads(data)

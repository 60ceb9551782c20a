"""Journal entries: encode call arguments and results, and check their integrity."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from savegame.codec import values
from savegame.errors import CorruptRecordError
from savegame.model import EffectRecord


def effect_checksum(effect: EffectRecord) -> str:
    digest = hashlib.blake2b(digest_size=16)
    identity = f"{effect.run_id}\0{effect.request_id}\0{effect.kind.value}\0{effect.name}\0{effect.status.value}\0"
    digest.update(identity.encode())
    digest.update(effect.arguments)
    digest.update(b"\0" if effect.result is None else b"\1" + effect.result)
    return digest.hexdigest()


def sealed(effect: EffectRecord) -> EffectRecord:
    """The entry with its checksum filled in."""
    return replace(effect, checksum=effect_checksum(effect))


def verify(effect: EffectRecord) -> EffectRecord:
    if effect_checksum(effect) != effect.checksum:
        raise CorruptRecordError(
            f"{effect.run_id}/{effect.request_id}", "journal entry checksum mismatch"
        )
    return effect


def encode_value(value: Any, path: str) -> bytes:
    return values.dumps(value, path)


def decode_value(data: bytes | None) -> Any:
    return None if data is None else values.loads(data)

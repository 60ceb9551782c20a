"""Pure-data encoding, integrity checks and state migrations."""

from savegame.codec._entries import (
    decode_value,
    encode_value,
    entry_checksum,
    open_entry,
    seal_entry,
    verify_entry,
)
from savegame.codec.envelope import decode, encode, marker, rewrap
from savegame.codec.migrate import Migration, upgrade
from savegame.codec.registry import register
from savegame.codec.values import canonical, dumps, loads

__all__ = [
    "Migration",
    "canonical",
    "decode",
    "decode_value",
    "dumps",
    "encode",
    "encode_value",
    "entry_checksum",
    "loads",
    "marker",
    "open_entry",
    "register",
    "rewrap",
    "seal_entry",
    "upgrade",
    "verify_entry",
]

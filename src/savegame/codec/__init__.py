"""Pure-data encoding, integrity checks and state migrations."""

from savegame.codec.envelope import decode, encode, marker, rewrap
from savegame.codec.migrate import Migration, upgrade
from savegame.codec.registry import register
from savegame.codec.values import canonical, dumps, loads

__all__ = [
    "Migration",
    "canonical",
    "decode",
    "dumps",
    "encode",
    "loads",
    "marker",
    "register",
    "rewrap",
    "upgrade",
]

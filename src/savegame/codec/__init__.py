"""Pure-data encoding, integrity checks and state migrations.

What other packages and users need is exported here; the modules behind it are
private, except :mod:`savegame.codec.crypto` (``Keyring``, ``new_key``) and
:mod:`savegame.codec.storage` (``StorageConfig``), the settings a user builds.
"""

from savegame.codec._blobs import known_blobs, unseal_blob
from savegame.codec._entries import (
    decode_value,
    encode_value,
    entry_checksum,
    open_entry,
    seal_entry,
    verify_entry,
)
from savegame.codec._envelope import open_record, seal_record
from savegame.codec._metadata import refuse_reserved, reseal_metadata, reveal_metadata
from savegame.codec._records import decode, encode, marker, rewrap
from savegame.codec._refs import Renamed, Renamer
from savegame.codec._runs import (
    check_head,
    reseal_run,
    reveal_run_metadata,
    run_checksum,
    seal_error,
    verify_run,
)
from savegame.codec.migrate import Migration, upgrade
from savegame.codec.registry import register
from savegame.codec.values import canonical, dumps, loads

__all__ = [
    "Migration",
    "Renamed",
    "Renamer",
    "canonical",
    "check_head",
    "decode",
    "decode_value",
    "dumps",
    "encode",
    "encode_value",
    "entry_checksum",
    "known_blobs",
    "loads",
    "marker",
    "open_entry",
    "open_record",
    "refuse_reserved",
    "register",
    "reseal_metadata",
    "reseal_run",
    "reveal_metadata",
    "reveal_run_metadata",
    "rewrap",
    "run_checksum",
    "seal_entry",
    "seal_error",
    "seal_record",
    "unseal_blob",
    "upgrade",
    "verify_entry",
    "verify_run",
]

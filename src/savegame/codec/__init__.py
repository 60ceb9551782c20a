"""Pure-data encoding, integrity checks and state migrations.

Users need :func:`register`, :class:`Migration`, :func:`canonical`, :func:`dumps` and
:func:`loads`, :func:`to_data` and :func:`from_data`, and for a record built by hand
:func:`encode` and :func:`decode`. The rest is what savegame's runtime, effects,
inspect and maintenance packages ask of the codec. The modules behind it, one job each:

    _values     pure data <-> JSON trees with tags (_registry: registered types;
                _stdlib: deque, paths, IP addresses ... registered by name;
                _conventions: what a framework's saver asks, tuples as lists ...)
    _delta      a patch between two states
    _packs      long lists and dicts of a keyframe as packs
    _refs       blob references in a tree: extract, resolve, rename (rekey)
    _blobs      a blob's name and stored bytes; the blobs known to be stored
    _compress   zstd
    _envelope   a checkpoint record's envelope, formats 1-4: seal, open, parse
    _metadata   sensitive metadata sealed and revealed
    _runs       run rows: their check, their head, their error text
    _entries    journal entries: seal, open, verify
    _records    whole records one at a time: encode, decode, rewrap, marker
    _engine     the storage engine: Encoder (keyframes and deltas), load_chain
    _migrate    state-schema migrations

They are private. Two modules stay public, because users build what they hold:
:mod:`savegame.codec.crypto` (``Keyring``, ``new_key``) and
:mod:`savegame.codec.storage` (``StorageConfig``).
"""

from savegame.codec import _stdlib  # noqa: F401  (registers the standard library's values)
from savegame.codec._blobs import blob_digest, known_blobs, unseal_blob
from savegame.codec._byvalue import Seen
from savegame.codec._conventions import Conventions
from savegame.codec._conventions import using as using_conventions
from savegame.codec._engine import Chain, Encoded, Encoder, load_chain, load_state
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
from savegame.codec._migrate import Migration, upgrade
from savegame.codec._records import decode, encode, marker, rewrap, unlisted_files
from savegame.codec._refs import Renamed, Renamer
from savegame.codec._registry import register, storable
from savegame.codec._runs import (
    check_head,
    reseal_run,
    reveal_run_metadata,
    run_checksum,
    seal_error,
    verify_run,
)
from savegame.codec._schedules import schedule_checksum, verify_schedule
from savegame.codec._values import (
    Unregistered,
    canonical,
    dumps,
    from_data,
    loads,
    placeholders,
    to_data,
)

__all__ = [
    "Chain",
    "Conventions",
    "Encoded",
    "Encoder",
    "Migration",
    "Renamed",
    "Renamer",
    "Seen",
    "Unregistered",
    "blob_digest",
    "canonical",
    "check_head",
    "decode",
    "decode_value",
    "dumps",
    "encode",
    "encode_value",
    "entry_checksum",
    "from_data",
    "known_blobs",
    "load_chain",
    "load_state",
    "loads",
    "marker",
    "open_entry",
    "open_record",
    "placeholders",
    "refuse_reserved",
    "register",
    "reseal_metadata",
    "reseal_run",
    "reveal_metadata",
    "reveal_run_metadata",
    "rewrap",
    "run_checksum",
    "schedule_checksum",
    "seal_entry",
    "seal_error",
    "seal_record",
    "storable",
    "to_data",
    "unlisted_files",
    "unseal_blob",
    "upgrade",
    "using_conventions",
    "verify_entry",
    "verify_run",
    "verify_schedule",
]

"""zstandard compression of payloads and blobs above a size threshold.

Compressor objects are not thread-safe, and the async writer and the loop may
encode concurrently, so a call takes one from a pool and puts it back after: never two
threads on one. Not one per thread: LangGraph runs a saver's calls on a new thread pool
every ``invoke``, and a new (de)compressor costs 60-90 us to set up (300-400 us in a
fresh thread, whose allocator arena is cold), more than compressing a message.
"""

from __future__ import annotations

import zstandard

#: Level 3 (zstd's default): ~300 MB/s on JSON with most of the ratio of higher levels.
#: For blobs and packs, written once and kept by many checkpoints.
LEVEL = 3
#: For a checkpoint's own record and a journal entry's values, written on every step:
#: on a 2 KB delta level 1 took 8 us where 3 took 15, for 2% more bytes (1,218 vs 1,193;
#: on 32 KiB packs it is 5%).
RECORD_LEVEL = 1
#: A record-level body at most this long is compressed with a small match table:
#: zstd's level 1 for a source this size still clears a 16 KiB hash table and tries
#: 5-byte matches; a 256-entry table and 6-byte matches compressed the benchmarks' 2 KB
#: deltas 25 % faster for 0.6 % more bytes (LangGraph's sub-KB writes: 15 %, 0.8 %).
#: Larger bodies lose more ratio than time to it (+6 % bytes at 8 KiB), so they keep
#: level 1. A setting of the compressor only: every frame reads as before.
SMALL_BODY = 4096
_SMALL_PARAMS = {
    checksum: zstandard.ZstdCompressionParameters.from_level(
        RECORD_LEVEL, hash_log=8, min_match=6, write_checksum=checksum
    )
    for checksum in (False, True)
}
#: Idle compressors by (checksum, level), and idle decompressors. ``list.pop`` and
#: ``list.append`` are atomic, so no lock: a pool holds at most as many as threads
#: ever compressed at once. One that raised is not put back.
_compressors: dict[tuple[bool, int | None], list[zstandard.ZstdCompressor]] = {}
_decompressors: list[zstandard.ZstdDecompressor] = []


def compress(data: bytes, *, checksum: bool = False, level: int = LEVEL) -> bytes:
    """``checksum``: the frame carries XXH64 of the content (4 bytes), which
    decompress() checks, so damage is caught without hashing the output again."""
    small = level == RECORD_LEVEL and len(data) <= SMALL_BODY
    pool = (checksum, None if small else level)
    idle = _compressors.get(pool)
    if idle is None:
        idle = _compressors.setdefault(pool, [])
    try:
        compressor = idle.pop()
    except IndexError:
        if small:
            compressor = zstandard.ZstdCompressor(compression_params=_SMALL_PARAMS[checksum])
        else:
            compressor = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    # The frame records the content size, so decompress() needs no size hint.
    out: bytes = compressor.compress(data)
    idle.append(compressor)
    return out


def declared_size(data: bytes) -> int:
    """The size a zstd frame says its content has (what decompress() allocates at once).

    Raises:
        ValueError: the frame states no size (compress() always writes one), or is no frame.
    """
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a zstd frame: {exc}") from None
    if size < 0:
        raise ValueError("its zstd frame states no content size")
    return size


def decompress(data: bytes, *, limit: int | None = None) -> bytes:
    """The frame's content. zstandard allocates the size the frame header states before it
    reads a byte of the body (a 62-byte frame may state 4 GiB), so ``limit`` is checked
    against that statement first: a frame stating more is refused without allocating.
    Content longer than stated fails (zstd stops at the stated size).

    Raises:
        ValueError: the frame states more than ``limit`` bytes, or no size.
    """
    if limit is not None and (size := declared_size(data)) > limit:
        raise ValueError(f"its zstd frame states {size:,} bytes, more than the {limit:,} allowed")
    try:
        decompressor = _decompressors.pop()
    except IndexError:
        decompressor = zstandard.ZstdDecompressor()
    out: bytes = decompressor.decompress(data)
    _decompressors.append(decompressor)
    return out

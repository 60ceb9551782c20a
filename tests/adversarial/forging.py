"""Export files edited as an attacker who knows the format would edit them: every frame's
SHA-256, the end record's and the header's counts recomputed; and zstd frames made by
hand, stating whatever content size the attacker likes."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

from savegame.maintenance import _archive

#: zstd's frame magic, and a frame header: a single segment whose 8-byte content size follows.
_ZSTD_MAGIC, _SINGLE_SEGMENT_8 = b"\x28\xb5\x2f\xfd", b"\xe0"
_RLE_BLOCK = 128 << 10


def forged(data: bytes, edit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bytes:
    """The file with ``edit`` applied to each record (None drops it), every checksum
    and the header's counts recomputed: what an attacker who knows the format can do."""
    records = [obj for _, _, obj in _archive.frames(data)]
    kept = [e for e in (edit(dict(r)) for r in records[1:]) if e is not None]
    counts = {"runs": 0, "records": 0, "effects": 0, "blobs": 0}
    for r in kept:
        counts[
            {"run": "runs", "checkpoint": "records", "effect": "effects"}.get(r["type"], "blobs")
        ] += 1
    return written([{**records[0], "counts": counts}, *kept])


def written(records: list[dict[str, Any]]) -> bytes:
    """An export file of these records (the first the header), its end record after them."""
    out = io.BytesIO()
    writer = _archive.Writer(out)
    for record in records:
        writer.write(record)
    writer.end()
    return out.getvalue()


def on(kind: str, change: Callable[[dict[str, Any]], None], *, once: bool = False) -> Any:
    """An edit for :func:`forged` that applies ``change`` to records of ``kind``."""
    done: list[bool] = []

    def edit(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["type"] == kind and not (once and done):
            change(obj)
            done.append(True)
        return obj

    return edit


def zeros_frame(size: int) -> bytes:
    """A zstd frame of ``size`` zero bytes that states its size: 4 bytes per 128 KiB (RLE
    blocks), written by hand, so a bomb of gigabytes costs no time to make."""
    blocks = []
    left = size
    while left > 0:
        n = min(left, _RLE_BLOCK)
        left -= n
        header = (n << 3) | (1 << 1) | (1 if left == 0 else 0)  # RLE, last block flag
        blocks.append(header.to_bytes(3, "little") + b"\0")
    return _ZSTD_MAGIC + _SINGLE_SEGMENT_8 + struct.pack("<Q", size) + b"".join(blocks)

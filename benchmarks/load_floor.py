"""What loading N messages costs at the least on this machine, whatever the store does.

The load targets of issue 4 (latest state of the appending loop in a fresh
process: < 2 ms at 400 steps, < 5 ms at 2,000) ask for 0.8 and 4.1 MB of
message text to come back as Python strings. This measures the parts any
design has to pay for, on the same messages, in one run:

* parsing the whole state as one JSON document (what a store that keeps the
  state as JSON, as LangGraph's savers do, pays before anything else);
* turning the raw UTF-8 bodies into ``str`` (the floor for text kept raw);
* zstd-decompressing the bodies one frame per message (savegame before packs:
  each message was its own blob) and in packs of 16 messages (about 32 KiB,
  savegame's default ``pack_bytes``) and of 256 (one frame per pack);
* reading the compressed bodies from SQLite as one row per message and as one
  row per pack.

    python benchmarks/load_floor.py

Medians of 15 repeats; no target is asserted, the table just says which
combinations fit in the budget.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path

import orjson
import zstandard
from workload import machine, markdown, median_ms, message

from savegame.codec._compress import LEVEL

PACKS = (16, 256)
REPEAT = 15
COUNTS = (400, 2000)
TARGET_MS = {400: 2.0, 2000: 5.0}


def sqlite_read_ms(folder: Path, rows: list[bytes]) -> float:
    """``SELECT`` every row by key in one statement, as a chain's blobs are read."""
    db = folder / f"rows-{len(rows)}.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE blobs (digest TEXT PRIMARY KEY, data BLOB NOT NULL)")
        keys = [f"{i:064x}" for i in range(len(rows))]
        conn.executemany("INSERT INTO blobs VALUES (?, ?)", zip(keys, rows, strict=True))
        conn.commit()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TEMP TABLE wanted (digest TEXT PRIMARY KEY)")
        conn.executemany("INSERT INTO wanted VALUES (?)", [(k,) for k in keys])
        sql = "SELECT b.digest, b.data FROM wanted w JOIN blobs b ON b.digest = w.digest"
        return median_ms(lambda: conn.execute(sql).fetchall(), REPEAT)


def measure(count: int, folder: Path) -> list[list[str]]:
    messages = [message(i) for i in range(count)]
    bodies = [m["content"].encode() for m in messages]
    document = orjson.dumps({"messages": messages})
    compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
    decompressor = zstandard.ZstdDecompressor()
    frames = [compressor.compress(b) for b in bodies]
    packs = {
        size: [
            compressor.compress(orjson.dumps(messages[i : i + size])) for i in range(0, count, size)
        ]
        for size in PACKS
    }
    raw_mb = sum(map(len, bodies)) / 1e6

    def row(what: str, ms: float, stored: float | None = None) -> list[str]:
        fits = "yes" if ms < TARGET_MS[count] else "no"
        size = "-" if stored is None else f"{stored / 1e6:.2f}"
        return [str(count), what, f"{ms:.2f}", size, fits]

    return [
        row("orjson.loads of the whole state (one JSON document)",
            median_ms(lambda: orjson.loads(document), REPEAT), len(document)),
        row("bytes.decode of the raw bodies", median_ms(lambda: [b.decode() for b in bodies], REPEAT),
            raw_mb * 1e6),
        row("zstd, one frame per message (savegame before packs)",
            median_ms(lambda: [decompressor.decompress(f) for f in frames], REPEAT),
            sum(map(len, frames))),
        *[row(f"zstd, one frame per {size} messages, + orjson.loads",
              median_ms(lambda p=p: [orjson.loads(decompressor.decompress(x)) for x in p], REPEAT),
              sum(map(len, p)))
          for size, p in packs.items()],
        row("SQLite read, one row per message frame", sqlite_read_ms(folder, frames)),
        *[row(f"SQLite read, one row per {size}-message pack", sqlite_read_ms(folder, p))
          for size, p in packs.items()],
    ]  # fmt: skip


def main() -> None:
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="savegame-floor-") as folder:
        for count in COUNTS:
            print(f"{count} messages", file=sys.stderr, flush=True)
            rows.extend(measure(count, Path(folder)))
    print(f"Machine: {machine()}")
    print()
    print(markdown(["messages", "part of a load", "ms (median)", "stored MB", "fits the target alone"],
                   rows, numeric_from=2))  # fmt: skip


if __name__ == "__main__":
    main()

"""What the benchmarks share: realistic message text, byte counting, tables, the machine.

Imported by the scripts next to it (``python benchmarks/X.py`` puts this folder
on ``sys.path``), so it is not part of the installed package.
"""

from __future__ import annotations

import functools
import os
import platform
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from importlib import metadata
from pathlib import Path
from typing import Any

MESSAGE_BYTES = 2048
SEED = 20240607
# PRAGMA synchronous reports a number; the docs and our URLs use the names.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

_ONSETS = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]  # fmt: skip
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "io", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "nt", "rd", "st", "ck"]


def vocabulary(size: int = 4000, seed: int = SEED) -> list[str]:
    """``size`` distinct made-up words of one to four syllables, the same on every run.

    Invented words rather than a bundled word list: no data file to ship, and
    the text still has word-like redundancy (shared syllables, spaces), roughly
    what zstd meets in English prose or JSON tool output.
    """
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        syllables = rng.choices([1, 2, 3, 4], weights=[3, 5, 3, 1])[0]
        words["".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                      for _ in range(syllables))] = None  # fmt: skip
    return list(words)


_VOCABULARY = vocabulary()


def message_text(index: int, size: int = MESSAGE_BYTES) -> str:
    """``size`` characters of pseudo-prose, distinct per ``index``, deterministic.

    Words are drawn uniformly (not Zipf-like), which compresses worse than real
    text: the compression gains the benchmarks report are, if anything, understated.
    ``"x" * 2048`` would compress about 200x and flatter any compressing store.
    """
    rng = random.Random(SEED * 1_000_003 + index)
    parts: list[str] = []
    length = 0
    sentence = 0
    while length < size:
        word = rng.choice(_VOCABULARY)
        if sentence == 0:
            word = word.capitalize()
        sentence += 1
        if sentence > rng.randint(6, 18):
            word += rng.choice([".", ".", ".", "?", "!"])
            sentence = 0
        elif rng.random() < 0.08:
            word += ","
        parts.append(word)
        length += len(word) + 1
    return " ".join(parts)[:size]


@functools.cache
def message(index: int) -> dict[str, str]:
    """The chat message appended at step ``index``: a 2 KB body, roles alternating.

    Cached, so generating text (about 0.6 ms a message) stays out of every timed
    region after the warm-up; nothing mutates the dicts.
    """
    return {"role": "user" if index % 2 == 0 else "assistant", "content": message_text(index)}


def zstd_ratio(count: int = 50) -> float:
    """How much zstd (savegame's level) shrinks one message body, median over ``count``:
    printed with the results so readers can judge how compressible the workload is."""
    from savegame.codec._compress import compress

    return statistics.median(
        MESSAGE_BYTES / len(compress(message_text(i).encode())) for i in range(count)
    )


def stored_bytes(db: Path) -> int:
    """Bytes on disk once the WAL is folded into the main file.

    Without the TRUNCATE checkpoint the number would depend on when SQLite last
    auto-checkpointed and on whether the system closed its connection (the last
    close checkpoints too), not on what the system stores.
    """
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def median_ms(call: Callable[[], object], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls, after one unrecorded call that pays
    for lazy imports and cold caches: these numbers are about the steady cost."""
    call()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by linear interpolation, as numpy's default does."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class TimedWrites:
    """A store whose ``put_checkpoint`` calls are timed (seconds in ``writes``); the rest passes through.

    The write time used to come from an ``Observer(on_checkpoint=...)``, but after an
    on_checkpoint callback the runtime reads the run row again before the next step
    (user code may have asked to cancel), so timing with one would add that read to
    every step measured.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        written = self.inner.put_checkpoint(*args, **kwargs)
        self.writes.append(time.perf_counter() - started)
        return written


def markdown(header: list[str], rows: Iterable[list[str]], *, numeric_from: int) -> str:
    """A padded GitHub markdown table: readable in a terminal and pasteable into docs.

    rich renders box-drawn tables, which are not markdown, so this stays plain.
    """
    body = [header, *rows]
    widths = [max(len(row[c]) for row in body) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(w) if c >= numeric_from else cell.ljust(w)
            for c, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [("-" * (w - 1) + ":") if c >= numeric_from else "-" * w for c, w in enumerate(widths)]
    return "\n".join([line(header), line(rule), *(line(row) for row in body[1:])])


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine(*extra: str) -> str:
    parts = [
        f"{platform.system()} {platform.release()} {platform.machine()}, nproc {os.cpu_count()}",
        f"Python {platform.python_version()}",
        f"SQLite {sqlite3.sqlite_version}",
        *extra,
    ]
    return "; ".join(parts)

"""Unique, time-sortable identifiers.

Ids are 26-character Crockford base32 strings, ULID-style: 48 bits of
milliseconds then 80 random bits. Within one process ids are strictly
increasing even inside one millisecond, so a run's checkpoint ids sort in the
order they were taken.
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = 0


# Two digits per lookup, 10 bits at a time: a divmod loop per digit took about 5 us per
# id, and every checkpoint takes one.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def _encode(value: int, length: int) -> str:
    """``value`` as ``length`` base32 digits, most significant first."""
    top = 10 * ((length - 1) // 2)
    pairs = "".join([_PAIRS[(value >> shift) & 1023] for shift in range(top, -1, -10)])
    # An odd length reads one digit of padding (a zero) before the first.
    return pairs[len(pairs) - length :]


def new_id() -> str:
    """Return a new unique id that sorts after every id this process made before."""
    global _last
    with _lock:
        candidate = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
        # Monotonic within the process: the same millisecond bumps the random part.
        if candidate <= _last:
            candidate = _last + 1
        _last = candidate
    return _encode(candidate, 26)


def id_time_ms(ident: str) -> int:
    """Milliseconds since the epoch encoded in an id made by :func:`new_id`."""
    value = 0
    for ch in ident[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    # 10 chars = 50 bits; the top 2 are padding (26 chars hold 130 bits for 128).
    return value

"""Unique, time-sortable identifiers, and the check of ids a user gives.

Ids are 26-character Crockford base32 strings, ULID-style: 48 bits of
milliseconds then 80 random bits. Within one process ids are strictly
increasing even inside one millisecond, so a run's checkpoint ids sort in the
order they were taken.

A run or thread id may also come from a user (``run(..., run_id=...)``,
``savegame run --run-id``); :func:`check_given` refuses those that logs, URLs,
one-line output and stores could not carry whole.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import unicodedata

from savegame.errors import ConfigurationError

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = ""
_last_ms = -1
_prefix = ""
_last_high = -1
_high = ""
_pool = b""
_drawn = 0

# Two digits per lookup, 10 bits at a time: a divmod loop per digit took about 5 us per
# id, and every checkpoint takes one.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]

# A random byte's low 5 bits as a digit: 16 random bytes are then the 80 random bits of
# an id as 16 digits, drawn in C. Encoding the whole 128-bit number instead took 17k
# instructions an id (13 shifts of a large int), 2-3 % of a checkpoint of memory://.
_NOISE = bytes.maketrans(bytes(range(256)), bytes(ord(_ALPHABET[b & 31]) for b in range(256)))
# The alphabet in the order of int()'s base-32 digits, to read an id back as a number.
_AS_BASE32 = str.maketrans(_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_NEXT = dict(itertools.pairwise(_ALPHABET))


def _encode(value: int, length: int) -> str:
    """``value`` as ``length`` base32 digits, most significant first."""
    top = 10 * ((length - 1) // 2)
    pairs = "".join([_PAIRS[(value >> shift) & 1023] for shift in range(top, -1, -10)])
    # An odd length reads one digit of padding (a zero) before the first.
    return pairs[len(pairs) - length :]


_POOL = 4096
"""Random bytes drawn from the system at once: 256 ids. A draw is a system call, about
1.5 us of CPU on the VM of docs/benchmarks.md, as much as the rest of ``new_id``."""


def _forget_pool() -> None:
    # A forked child must not take the parent's next random bytes: its ids would collide.
    global _drawn
    _drawn = len(_pool)


os.register_at_fork(after_in_child=_forget_pool)


def new_id() -> str:
    """Return a new unique id that sorts after every id this process made before."""
    global _last, _last_ms, _prefix, _pool, _drawn, _last_high, _high
    with _lock:
        if _drawn + 16 > len(_pool):
            _pool, _drawn = os.urandom(_POOL), 0
        noise = _pool[_drawn : _drawn + 16].translate(_NOISE).decode()
        _drawn += 16
        ms = time.time_ns() // 1_000_000
        if ms != _last_ms:
            # The prefix's first 8 digits are the milliseconds' high bits, which change
            # every 1,024 ms: encoded then; the last two digits (10 bits) are one pair.
            # Encoding all 10 took 10k instructions, at each checkpoint of a run whose
            # steps take a millisecond or more.
            high = ms >> 10
            if high != _last_high:
                _last_high, _high = high, _encode(high, 8)
            _last_ms, _prefix = ms, _high + _PAIRS[ms & 1023]
        # Fixed width in an alphabet in ASCII order: the strings sort as the numbers do.
        candidate = _prefix + noise
        # Monotonic within the process: the same millisecond bumps the random part.
        if candidate <= _last:
            digit = _last[-1]  # plus one: the last digit, unless that carries (1 in 32)
            if digit != "Z":
                candidate = _last[:-1] + _NEXT[digit]
            else:
                candidate = _encode(int(_last.translate(_AS_BASE32), 32) + 1, 26)
        _last = candidate
    return candidate


def id_time_ms(ident: str) -> int:
    """Milliseconds since the epoch encoded in an id made by :func:`new_id`."""
    value = 0
    for ch in ident[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    # 10 chars = 50 bits; the top 2 are padding (26 chars hold 130 bits for 128).
    return value


MAX_GIVEN_LENGTH = 200
"""The longest run or thread id a user may give (a generated one has 26 characters)."""

_INVISIBLE = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate (not text)",
}


def check_given(**given: object) -> None:
    """Refuse the ids a user gave, each named by its parameter (``run_id=...``); None passes.

    Raises:
        ConfigurationError: naming the parameter and what is wrong: not a string, empty,
            longer than :data:`MAX_GIVEN_LENGTH`, or holding whitespace or a control,
            format or surrogate character (a newline would split a log line or a
            table row; a zero-width or right-to-left mark makes two ids look alike).
    """
    for name, value in given.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigurationError(f"{name} must be a string, not {type(value).__qualname__}")
        if not value:
            raise ConfigurationError(f"{name} must not be empty (leave it out for a new id)")
        if len(value) > MAX_GIVEN_LENGTH:
            raise ConfigurationError(
                f"{name} is {len(value)} characters long; at most {MAX_GIVEN_LENGTH}"
            )
        for index, char in enumerate(value):
            kind = "whitespace" if char.isspace() else _INVISIBLE.get(unicodedata.category(char))
            if kind is not None:
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise ConfigurationError(
                    f"{name} {shown!r} has {kind} (U+{ord(char):04X}) at position {index}: "
                    "ids take no whitespace or control characters"
                )

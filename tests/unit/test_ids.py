"""Ids: Crockford base32, ULID layout, increasing within a process."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from savegame.ids import _ALPHABET, _encode, id_time_ms, new_id


def digits(value: int, length: int) -> str:
    """The definition: ``length`` base32 digits, most significant first."""
    return "".join(_ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(length)))


@given(st.integers(min_value=1, max_value=27).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=32**n - 1), st.just(n))
))  # fmt: skip
def test_encode_writes_every_digit_of_odd_and_even_lengths(case: tuple[int, int]) -> None:
    value, length = case
    assert _encode(value, length) == digits(value, length)


def test_ids_sort_in_creation_order_and_carry_their_time() -> None:
    before = time.time_ns() // 1_000_000
    made = [new_id() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(len(i) == 26 and set(i) <= set(_ALPHABET) for i in made)
    assert before <= id_time_ms(made[0]) <= id_time_ms(made[-1]) <= after

"""Ids: Crockford base32, ULID layout, increasing within a process."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from savegame.errors import ConfigurationError
from savegame.ids import _ALPHABET, MAX_GIVEN_LENGTH, _encode, check_given, id_time_ms, new_id


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


@given(st.lists(st.integers(min_value=0, max_value=2**48 - 1026), min_size=1, max_size=20))
def test_an_id_carries_its_millisecond_whole_across_the_cached_high_digits(
    times: list[int],
) -> None:
    # new_id encodes the time's 8 high digits only when they change (every 1,024 ms) and
    # its last two from a table: whatever millisecond came before, the prefix is the
    # time's 10 digits, never the previous high digits with the new low ones.
    from unittest import mock

    moments = sorted({t + d for t in times for d in (0, 1023, 1024, 1025)})
    # A fresh process's state for the ids (restored after: later ids are not bumped
    # past these times, which may lie ahead of the clock).
    with mock.patch.multiple(
        "savegame.ids", _last="", _last_ms=-1, _prefix="", _last_high=-1, _high=""
    ):
        for ms in moments:
            with mock.patch("savegame.ids.time.time_ns", return_value=ms * 1_000_000):
                made = new_id()
            assert made[:10] == digits(ms, 10) and id_time_ms(made) == ms


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"run_id": "a\nb"}, r"run_id 'a\\nb' has whitespace \(U\+000A\) at position 1"),
        ({"thread_id": "t 1"}, r"thread_id 't 1' has whitespace \(U\+0020\)"),
        ({"run_id": "r\x00"}, r"has a control character \(U\+0000\)"),
        ({"run_id": "r\x1b[31m"}, r"has a control character \(U\+001B\)"),
        ({"run_id": "pay\u200bment"}, r"has an invisible format character \(U\+200B\)"),
        ({"run_id": "x\u202egnp.exe"}, r"has an invisible format character \(U\+202E\)"),
        ({"run_id": "bad\udcff"}, r"has a lone surrogate"),
        ({"run_id": ""}, "run_id must not be empty"),
        ({"thread_id": "t" * 201}, "thread_id is 201 characters long; at most 200"),
        ({"run_id": 42}, "run_id must be a string, not int"),
    ],
    ids=[
        "newline", "space", "nul", "escape", "zero-width", "right-to-left",
        "surrogate", "empty", "too-long", "not-a-string",
    ],
)  # fmt: skip
def test_check_given_refuses_ids_that_cannot_be_carried_whole(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        check_given(**kwargs)


def test_check_given_accepts_ordinary_ids() -> None:
    check_given(run_id="order-2024/07:refund#3", thread_id="ünïcode-fine-日本", other=None)
    check_given(run_id="r" * MAX_GIVEN_LENGTH, thread_id=new_id())


def test_ids_in_one_millisecond_bump_the_random_part_when_it_draws_lower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import savegame.ids as ids

    monkeypatch.setattr(ids, "_pool", bytes([31] * 16) + bytes(16) + bytes([1] * 16))
    monkeypatch.setattr(ids, "_drawn", 0)
    monkeypatch.setattr(ids.time, "time_ns", lambda: 1_700_000_000_123_456_789)
    monkeypatch.setattr(ids, "_last", "")
    first, second, third = new_id(), new_id(), new_id()
    assert first == digits(1_700_000_000_123, 10) + "Z" * 16
    # The top of the millisecond: the next id is the next number, in the next millisecond.
    assert second == digits((1_700_000_000_123 << 80 | (1 << 80) - 1) + 1, 26)
    assert third == digits(int(second.translate(ids._AS_BASE32), 32) + 1, 26)
    assert first < second < third and id_time_ms(second) == 1_700_000_000_124


def test_a_forked_child_draws_its_own_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    import savegame.ids as ids

    monkeypatch.setattr(ids, "_pool", bytes(64))
    monkeypatch.setattr(ids, "_drawn", 0)
    monkeypatch.setattr(ids.os, "urandom", lambda n: bytes([5]) * n)
    assert new_id().endswith("0" * 16)  # from the pool
    ids._forget_pool()  # what a fork runs in the child
    assert new_id().endswith("5" * 16)  # a new draw, not the parent's next bytes


def test_ids_made_by_threads_at_once_are_unique_and_increase_in_each() -> None:
    """The pool, the prefix and the bump are shared: under the lock, every id is new and
    each thread's ids still sort in the order it made them (a bump from another thread's
    last id included)."""
    import threading

    made: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def make(out: list[str]) -> None:
        start.wait()
        out.extend(new_id() for _ in range(3000))

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for out in made for i in out]
    assert len(set(every)) == len(every) == 12_000
    assert all(out == sorted(out) for out in made)

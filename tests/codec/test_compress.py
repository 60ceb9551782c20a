"""zstd (de)compressors are pooled, not kept per thread: LangGraph runs a saver's calls on
a new thread pool every ``invoke``, and setting one up cost more than compressing a message."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import zstandard

from savegame.codec import _compress


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    made = [0]
    real: Callable[..., Any] = getattr(zstandard, name)

    def make(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(zstandard, name, make)
    return made


def _in_new_thread(work: Callable[[], Any]) -> Any:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


def test_a_new_thread_reuses_the_compressors_another_thread_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = b"a message of some length, " * 40
    frame = _compress.compress(data, level=_compress.RECORD_LEVEL)
    assert _compress.decompress(frame) == data  # one of each is pooled now
    compressors = _counting(monkeypatch, "ZstdCompressor")
    decompressors = _counting(monkeypatch, "ZstdDecompressor")
    for _ in range(5):
        again = _in_new_thread(lambda: _compress.compress(data, level=_compress.RECORD_LEVEL))
        assert _in_new_thread(lambda frame=again: _compress.decompress(frame)) == data
    assert (compressors[0], decompressors[0]) == (0, 0)


def test_threads_compressing_at_once_each_get_their_own_and_every_frame_is_right() -> None:
    # Two threads on one compressor at once would interleave its state: frames that do
    # not decompress, or to another thread's bytes.
    barrier = threading.Barrier(8)
    wrong: list[int] = []

    def work(n: int) -> None:
        data = (f"thread {n} says: " * 200).encode()
        barrier.wait()
        for level in (1, 3, 1, 3) * 25:
            frame = _compress.compress(data, level=level, checksum=n % 2 == 0)
            if _compress.decompress(frame) != data:
                wrong.append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@pytest.mark.parametrize("size", [0, 1, 2048, _compress.SMALL_BODY, _compress.SMALL_BODY + 1])
@pytest.mark.parametrize("checksum", [False, True])
def test_bodies_on_each_side_of_the_small_body_limit_read_back(size: int, checksum: bool) -> None:
    data = (b"the quick brown fox jumps over the lazy dog " * 200)[:size]
    frame = _compress.compress(data, level=_compress.RECORD_LEVEL, checksum=checksum)
    assert _compress.declared_size(frame) == size
    assert zstandard.get_frame_parameters(frame).has_checksum is checksum
    assert _compress.decompress(frame) == data


def test_a_small_body_asked_to_carry_its_checksum_catches_damage() -> None:
    # The small-table compressor is made from parameters, not a level: the checksum
    # flag must travel in them, or damage to a journal value would read back unnoticed.
    data = bytes(range(256)) * 8  # incompressible enough that the body holds literals
    frame = bytearray(_compress.compress(data, level=_compress.RECORD_LEVEL, checksum=True))
    frame[len(frame) // 2] ^= 0x01
    with pytest.raises(zstandard.ZstdError):
        _compress.decompress(bytes(frame))


def test_only_small_record_bodies_get_the_small_table() -> None:
    # A larger body keeps level 1 (the small table costs it ratio), and blobs and packs
    # keep their level whatever their size.
    text = b"".join(
        f"line {n}: the same words again and again, {n * 7}\n".encode() for n in range(400)
    )
    large = text[: _compress.SMALL_BODY * 4]
    small = text[: _compress.SMALL_BODY]
    assert _compress.compress(large, level=1) == zstandard.ZstdCompressor(level=1).compress(large)
    assert _compress.compress(small, level=3) == zstandard.ZstdCompressor(level=3).compress(small)
    assert _compress.compress(small, level=1) != zstandard.ZstdCompressor(level=1).compress(small)

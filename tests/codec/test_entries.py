"""Journal values (codec/_entries.py): a long value stored as a zstd frame of its JSON,
read back by every reader of ``decode_value``, sealed and checked like a plain one."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from savegame.codec import decode_value, encode_value, open_entry, seal_entry
from savegame.errors import CorruptRecordError
from savegame.model import EffectKind, EffectRecord, EffectStatus
from tests.codec.chains import PLAIN, SECRET

LONG = {"role": "assistant", "content": "the tide comes in and the tide goes out " * 60}
ZSTD = b"\x28\xb5\x2f\xfd"


def test_a_long_value_is_a_zstd_frame_a_short_one_stays_json() -> None:
    plain = encode_value(LONG, "v")
    assert plain == orjson.dumps(LONG, option=orjson.OPT_SORT_KEYS)
    packed = encode_value(LONG, "v", compress_from=512)
    assert packed[:4] == ZSTD and len(packed) < len(plain) // 4
    assert decode_value(packed) == decode_value(plain) == LONG
    assert encode_value([1, 2], "v", compress_from=512) == b"[1,2]"
    # Where the frame is no smaller (short, random-looking text), the JSON stays.
    noise = "q7Zx9"
    assert encode_value(noise, "v", compress_from=1) == orjson.dumps(noise)
    assert encode_value(LONG, "v", compress_from=0) == plain  # 0: never compressed


@pytest.mark.parametrize("storage", [PLAIN, SECRET], ids=["plain", "encrypted"])
def test_a_compressed_value_is_sealed_and_checked_like_any_other(storage: object) -> None:
    effect = EffectRecord(
        "r1", "r1|t|0", EffectKind.READ, "messages", 0, "n", 0, EffectStatus.DONE,
        b"[]", encode_value(LONG, "result", compress_from=512),
    )  # fmt: skip
    stored = seal_entry(effect, storage)  # type: ignore[arg-type]
    if storage is SECRET:
        assert b"tide" not in (stored.result or b"")
    else:
        assert (stored.result or b"")[:4] == ZSTD
    assert decode_value(open_entry(stored, storage).result) == LONG  # type: ignore[arg-type]
    damaged = replace(stored, result=(stored.result or b"")[:-3] + b"xyz")
    with pytest.raises(CorruptRecordError):
        open_entry(damaged, storage)  # type: ignore[arg-type]


def test_a_damaged_frame_is_a_corrupt_value_not_a_crash() -> None:
    packed = encode_value(LONG, "v", compress_from=512)
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        decode_value(packed[:20])

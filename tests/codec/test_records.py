"""A checkpoint record: encoded with its checksum, refused when damaged, moved or from a newer format."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from savegame import codec
from savegame.errors import CorruptRecordError, SerializationError
from savegame.model import WORKSPACE_KEY, CheckpointHeader, RunStatus, StoredFile


def make_header(**over: Any) -> CheckpointHeader:
    base = CheckpointHeader(
        thread_id="t",
        run_id="r",
        checkpoint_id="c1",
        parent_id=None,
        step=0,
        node=None,
        status=RunStatus.RUNNING,
        next="a",
    )
    return replace(base, **over)


def test_record_round_trip_and_checksum() -> None:
    state = {"id": uuid.uuid4(), "when": dt.datetime.now(dt.timezone.utc), "n": Decimal("1.5")}
    record = codec.encode(make_header(), state)
    assert record.header.size == len(record.payload)
    assert codec.decode(record).state == state


def test_damaged_payload_is_reported_by_id() -> None:
    record = codec.encode(make_header(), {"n": 1})
    bad = replace(record, payload=record.payload.replace(b"1", b"2"))
    with pytest.raises(CorruptRecordError, match=r"c1.*checksum"):
        codec.decode(bad)


def test_payload_moved_under_another_id_is_detected() -> None:
    record = codec.encode(make_header(), {"n": 1})
    moved = replace(record, header=replace(record.header, checkpoint_id="c2"))
    with pytest.raises(CorruptRecordError, match="c2"):
        codec.decode(moved)


def test_newer_format_version_refuses_to_load() -> None:
    record = codec.encode(make_header(), {"n": 1})
    future = replace(record, header=replace(record.header, format_version=99))
    with pytest.raises(CorruptRecordError, match="newer than this savegame"):
        codec.decode(future)


def test_state_must_be_a_dict() -> None:
    with pytest.raises(SerializationError, match="must be a dict"):
        codec.encode(make_header(), [1, 2])  # type: ignore[arg-type]


def test_a_keyframe_lists_the_workspace_files_its_state_refers_to() -> None:
    """As the Encoder's records do: export, retention and rekey read a record's blobs from
    its header only (a fork's first record, written here, once listed none)."""
    a, b = "a" * 64, "b" * 64
    manifest = {"x.txt": StoredFile(b, 0o100644, 3), "y.txt": StoredFile(a, 0o100644, 4)}
    record = codec.encode(make_header(), {"n": 1, WORKSPACE_KEY: manifest})
    assert record.header.blobs == (a, b)
    assert codec.decode(record).state[WORKSPACE_KEY] == manifest
    # Labels given stay first, as given; a file already among them is not listed twice.
    labelled = codec.encode(make_header(blobs=(b, "label")), {WORKSPACE_KEY: manifest})
    assert labelled.header.blobs == (b, "label", a)
    assert codec.encode(make_header(blobs=("label",)), {"n": 1}).header.blobs == ("label",)


def test_a_users_dict_that_spells_a_file_reference_lists_no_blob() -> None:
    """The state's data is escaped: a dict ``{"$sg:blob": ["f", digest, ...]}`` an agent
    wrote (say, from a model's output) must not make its record list, and an export carry,
    the blob of another run's file that it names."""
    other = "c" * 64
    spelled: dict[str, Any] = {"$sg:blob": ["f", other, 0o100644, 9]}
    for state in (
        {"note": spelled},
        {"notes": [spelled, {"$sg:blob": ["f", other, 1, 1], "and": "more"}]},
        {"text": '{"$sg:blob":["f","' + other + '",1,1]}'},
    ):
        record = codec.encode(make_header(), state)
        assert record.header.blobs == ()
        assert codec.decode(record).state == state

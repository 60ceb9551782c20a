"""``model.evolve``: the hot path's copy of a record equals ``dataclasses.replace``'s; a
record built by its quicker ``__init__`` equals the one ``dataclasses`` wrote."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    RunInfo,
    RunStatus,
    Usage,
    evolve,
    evolver,
)


def _header() -> CheckpointHeader:
    return CheckpointHeader(
        "t", "r", "c", "p", 3, "n", RunStatus.RUNNING, "m",
        usage=Usage(1, 2, 0.5, 3, 4), metadata={"k": [1]},
        created_at=datetime(2026, 1, 2, tzinfo=timezone.utc), base_id="b", blobs=("x",),
    )  # fmt: skip


def test_evolve_equals_replace_field_by_field() -> None:
    header = _header()
    for name, value in [("base_id", None), ("blobs", ("y", "z")), ("size", 9), ("step", 4)]:
        assert evolve(header, **{name: value}) == dataclasses.replace(header, **{name: value})
    copy = evolve(header)
    assert copy == header and copy is not header
    record = CheckpointRecord(header, b"body", "sum")
    moved = evolve(record, payload=b"other", header=evolve(header, size=5))
    assert moved == dataclasses.replace(record, payload=b"other", header=evolve(header, size=5))
    assert record.payload == b"body" and header.size == 0  # the original is untouched


def test_evolve_refuses_a_name_that_is_no_field() -> None:
    with pytest.raises(TypeError):
        evolve(_header(), nope=1)


def test_an_evolver_of_named_fields_sets_those_and_keeps_the_rest() -> None:
    header = _header()
    copy = evolver(CheckpointHeader, "size", "blobs")
    assert copy(header, 9, ("y",)) == dataclasses.replace(header, size=9, blobs=("y",))
    assert copy(header, blobs=(), size=1) == dataclasses.replace(header, size=1, blobs=())
    assert evolver(CheckpointHeader, "size", "blobs") is copy  # built once
    with pytest.raises(TypeError):
        copy(header, size=1)  # every named field is required
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy(header, 1, ()).size = 5  # type: ignore[misc]
    for wrong in (("nope",), ("size", "size")):
        with pytest.raises(TypeError):
            evolver(CheckpointHeader, *wrong)


def test_evolve_copies_a_run_info_too() -> None:
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    info = RunInfo("r", "t", "w", None, RunStatus.RUNNING, 1, "c", now, now)
    assert evolve(info, step=2, error="e") == dataclasses.replace(info, step=2, error="e")
    with pytest.raises(dataclasses.FrozenInstanceError):
        evolve(info).step = 5  # type: ignore[misc]


def test_a_run_result_repr_abridges_the_state() -> None:
    # asyncio.run formats the repr of its main task's result on its way out: a whole
    # conversation there was a tenth of an arun's CPU.
    from savegame.model import RunResult

    state = {"messages": [{"role": "user", "content": "x" * 2048} for _ in range(400)], "n": 1}
    text = repr(RunResult("r", "t", RunStatus.COMPLETED, state, "c", 400))
    assert len(text) < 2000
    assert text.startswith("RunResult(run_id='r', thread_id='t', status=")
    assert "'n': 1" in text and "step=400" in text


def test_a_record_is_built_as_dataclasses_builds_it() -> None:
    import inspect

    from savegame.model import EffectKind, EffectRecord, EffectStatus, Lease, StoredFile, Waiting

    header = _header()
    generated = CheckpointHeader.__init__.__globals__["_generated"]
    twin = object.__new__(CheckpointHeader)
    generated(twin, *(getattr(header, f.name) for f in dataclasses.fields(header)))
    assert twin == header and type(header) is CheckpointHeader
    bare = CheckpointHeader("t", "r", "c", None, 0, None, RunStatus.RUNNING, None)
    assert bare.usage == Usage() and bare.metadata == {} and bare.blobs == ()
    other = CheckpointHeader("t", "r", "c", None, 0, None, RunStatus.RUNNING, None)
    assert bare.metadata is not other.metadata  # a factory's value, made per record
    assert bare.created_at.tzinfo is not None
    params = inspect.signature(CheckpointHeader).parameters
    assert list(params) == [f.name for f in dataclasses.fields(CheckpointHeader)]
    assert repr(params["metadata"].default) == "<factory>" and params["size"].default == 0
    with pytest.raises(TypeError):
        CheckpointHeader("t", "r")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        bare.step = 5  # type: ignore[misc]
    assert Waiting() == dataclasses.replace(Waiting())
    assert Lease("r", "o", 1, 2.0).token == 1
    assert StoredFile("d", 0o644, 3) == StoredFile(digest="d", mode=0o644, size=3)
    entry = EffectRecord("r", "q", EffectKind.WRITE, "n", 1, "s", 0, EffectStatus.PENDING, b"a")
    assert dataclasses.replace(entry, step=2).step == 2


def test_a_subclass_keeps_the_init_dataclasses_wrote() -> None:
    class Marked(Usage):
        __slots__ = ("mark",)

    usage = Marked(1, 2)
    assert type(usage) is Marked and usage.output_tokens == 2

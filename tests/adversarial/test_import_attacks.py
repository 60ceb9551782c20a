"""Hostile and damaged export files: each is refused before anything is written.

A truncated file or a flipped byte fails the file's own checks, named by record and
offset. A record edited with every checksum of the file recomputed (someone who
knows the format but holds no key) passes those, and is refused by the record's own
check under the target's keyring, the one ``savegame verify`` makes on a store.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, StepContext, StorageConfig, Workflow, tool
from savegame.codec.crypto import Keyring
from savegame.errors import CorruptRecordError, DamagedExportError, UnauthenticatedRecordError
from savegame.maintenance import _archive
from savegame.stores import MemoryStore, SqliteStore
from tests.adversarial.forging import forged, on, written

RING = Keyring({"atk": os.urandom(32)}, active="atk")
SEALED = StorageConfig(keyring=RING, blob_threshold=100)


@tool(effect="write", idempotent=True)
def atk_pay(amount: int, *, request_id: str) -> dict[str, int]:
    return {"paid": amount}


def _workflow() -> Workflow:
    wf = Workflow("import-attacks")

    @wf.step(entry=True)
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        receipt = ctx.call(atk_pay, n)
        return {"n": n, "receipt": receipt, "note": "z" * 200 + str(n)}, ("pay" if n < 3 else END)

    return wf


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """An encrypted run as an export file."""
    tmp = tmp_path_factory.mktemp("export")
    store = SqliteStore(tmp / "s.db")
    savegame.run(_workflow(), {}, store=store, run_id="victim", storage=SEALED)
    savegame.client.export_run("victim", tmp / "v.sgx", store=store)
    store.close()
    return (tmp / "v.sgx").read_bytes()


def _import(data: bytes, tmp_path: Path, store: MemoryStore) -> None:
    path = tmp_path / "in.sgx"
    path.write_bytes(data)
    savegame.client.import_run(path, store=store, storage=SEALED)


def _refused(data: bytes, tmp_path: Path, error: type[Exception] = CorruptRecordError) -> str:
    target = MemoryStore()
    with pytest.raises(error) as caught:
        _import(data, tmp_path, target)
    assert target.list_runs() == [] and target.stats().blobs == 0  # nothing half imported
    if error is not DamagedExportError:
        # The file's own checks held (the forger recomputed them): the record's refused it.
        assert not isinstance(caught.value, DamagedExportError), caught.value
    return str(caught.value)


def test_the_untouched_file_imports(exported: bytes, tmp_path: Path) -> None:
    target = MemoryStore()
    _import(exported, tmp_path, target)
    assert savegame.client.verify(store=target, storage=SEALED).ok


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_a_truncated_file_is_refused_naming_where(
    exported: bytes, tmp_path: Path, keep: float
) -> None:
    message = _refused(exported[: int(len(exported) * keep)], tmp_path, DamagedExportError)
    assert "truncated" in message and "record" in message and "at byte" in message


def test_a_file_cut_at_a_record_boundary_is_refused(exported: bytes, tmp_path: Path) -> None:
    ends = [o for _, o, _ in _archive.frames(exported)]
    message = _refused(exported[: ends[-1]], tmp_path, DamagedExportError)
    assert "truncated" in message


@pytest.mark.parametrize("at", [0.3, 0.6, 0.95])
def test_a_flipped_byte_is_refused_naming_the_record(
    exported: bytes, tmp_path: Path, at: float
) -> None:
    data = bytearray(exported)
    i = int(len(data) * at)
    data[i] ^= 0x01
    with pytest.raises(DamagedExportError) as caught:
        _import(bytes(data), tmp_path, MemoryStore())
    err = caught.value
    assert err.record is not None and err.offset is not None and err.offset <= i
    assert "SHA-256" in str(err) or "truncated" in str(err)


def test_bytes_after_the_end_and_other_files_are_refused(exported: bytes, tmp_path: Path) -> None:
    assert "follow the end" in _refused(exported + b"\0", tmp_path, DamagedExportError)
    assert "not a savegame export" in _refused(b"PK\x03\x04" * 10, tmp_path, DamagedExportError)


def test_a_forged_file_with_no_edit_still_imports(exported: bytes, tmp_path: Path) -> None:
    target = MemoryStore()  # the forger's tooling is right: the refusals below are for the edits
    _import(forged(exported, lambda r: r), tmp_path, target)
    assert savegame.client.get_checkpoint("victim", store=target, storage=SEALED).state["n"] == 3


def test_a_run_row_pointing_at_other_code_is_refused(exported: bytes, tmp_path: Path) -> None:
    def steer(obj: dict[str, Any]) -> None:
        obj["row"]["workflow_ref"] = "evil.module:wf"

    message = _refused(forged(exported, on("run", steer)), tmp_path)
    assert "run victim" in message


def test_a_checkpoint_header_steered_elsewhere_is_refused(exported: bytes, tmp_path: Path) -> None:
    def steer(obj: dict[str, Any]) -> None:
        obj["record"]["header"]["next"] = "refund_everyone"

    message = _refused(forged(exported, on("checkpoint", steer, once=True)), tmp_path)
    assert "damaged" in message


def test_a_journal_entry_with_another_result_is_refused(exported: bytes, tmp_path: Path) -> None:
    def steer(obj: dict[str, Any]) -> None:
        obj["entry"]["status"] = "not_done"  # so a resume would pay again

    _refused(forged(exported, on("effect", steer, once=True)), tmp_path)


def test_a_blob_swapped_is_refused(exported: bytes, tmp_path: Path) -> None:
    def steer(obj: dict[str, Any]) -> None:
        raw = bytearray(base64.b64decode(obj["data"]))
        raw[-1] ^= 0xFF
        obj["data"] = base64.b64encode(bytes(raw)).decode()

    assert "blob" in _refused(forged(exported, on("blob", steer, once=True)), tmp_path)


def test_a_plaintext_record_slipped_into_an_encrypted_export_is_refused(
    exported: bytes, tmp_path: Path
) -> None:
    def strip(obj: dict[str, Any]) -> None:
        obj["row"]["checksum"] = ""  # a row with no keyed check

    _refused(forged(exported, on("run", strip)), tmp_path, UnauthenticatedRecordError)


def test_a_row_whose_head_says_another_status_is_refused(exported: bytes, tmp_path: Path) -> None:
    def steer(obj: dict[str, Any]) -> None:
        obj["row"]["status"] = "running"  # the head says completed: a worker would claim it

    assert "head" in _refused(forged(exported, on("run", steer)), tmp_path)


def test_a_checkpoint_cut_out_is_refused(exported: bytes, tmp_path: Path) -> None:
    heads: list[str] = []

    def drop_head(obj: dict[str, Any]) -> dict[str, Any] | None:
        if obj["type"] == "run":
            heads.append(obj["row"]["head_checkpoint_id"])
        if obj["type"] == "checkpoint" and obj["record"]["header"]["checkpoint_id"] in heads:
            return None
        return obj

    assert "head" in _refused(forged(exported, drop_head), tmp_path, DamagedExportError)


def test_an_unknown_field_or_version_is_refused(exported: bytes, tmp_path: Path) -> None:
    def extra(obj: dict[str, Any]) -> None:
        obj["row"]["owner_is_root"] = True

    assert "owner_is_root" in _refused(
        forged(exported, on("run", extra)), tmp_path, DamagedExportError
    )
    records = [obj for _, _, obj in _archive.frames(exported)]
    assert "version 99" in _refused(
        written([{**records[0], "version": 99}]), tmp_path, DamagedExportError
    )


class _FailingStore(MemoryStore):
    """A memory store whose third checkpoint write fails (a lost connection midway)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put_checkpoint(self, record: Any, **kwargs: Any) -> Any:
        self.puts += 1
        if self.puts == 3:
            raise ConnectionError("the database went away")
        return super().put_checkpoint(record, **kwargs)


def test_a_write_that_fails_midway_leaves_nothing(exported: bytes, tmp_path: Path) -> None:
    target = _FailingStore()
    with pytest.raises(ConnectionError):
        _import(exported, tmp_path, target)
    assert target.puts == 3
    assert target.list_runs() == []
    with pytest.raises(savegame.errors.NotFoundError):
        target.get_run("victim")


def test_a_decompression_bomb_is_refused_before_it_fills_memory(tmp_path: Path) -> None:
    """Records of 30 MB of one letter each compress to a few kilobytes: a file that small
    may not unpack to more than its growth budget (found by an adversarial review: an
    86 KB file reached 4 GB of memory)."""
    counts = {"runs": 0, "records": 0, "effects": 0, "blobs": 3}
    header = {"type": "header", "format": "savegame-export", "version": 1, "counts": counts}
    blobs = [{"type": "blob", "digest": f"d{i}", "data": "A" * 30_000_000} for i in range(3)]
    bomb = written([header, *blobs])
    assert len(bomb) < 100_000
    (tmp_path / "bomb.sgx").write_bytes(bomb)
    with pytest.raises(DamagedExportError, match="decompression bomb") as refused:
        savegame.client.import_run(tmp_path / "bomb.sgx", store=MemoryStore())
    assert refused.value.record == 3  # the third blob is over the budget

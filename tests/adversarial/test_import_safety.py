"""``savegame import`` against what else is in the store and what a file may hide (issue 30).

Two imports of one run id at once: real ``savegame import`` processes, the first held in
the middle of its writes (its store's journal write waits for a file to appear) while
the second starts. A run of the file on a thread the store has. A decompression bomb
nested inside a record (a blob's or a payload's own zstd frame), whose import's peak
memory is read from the kernel (``wait4``).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, RunStatus, StepContext, StorageConfig, Workflow, tool
from savegame.codec import _envelope
from savegame.codec.crypto import Keyring
from savegame.errors import LeaseLostError, RunExistsError, ThreadExistsError
from savegame.maintenance import _archive
from savegame.maintenance._transfer import IMPORT_TTL, STALE
from savegame.model import CheckpointHeader
from savegame.runtime import owner_id
from savegame.stores import open_store
from savegame.stores.base import ALL_EFFECTS
from tests.adversarial.forging import forged, on, written, zeros_frame
from tests.services import postgres_schema, postgres_url

RING = Keyring({"imp": os.urandom(32)}, active="imp")
SEALED = StorageConfig(keyring=RING)


@tool(effect="write", idempotent=True)
def race_charge(amount: int, *, request_id: str) -> dict[str, int]:
    return {"charged": amount}


@tool(effect="write", approval=True)
def race_refund(amount: int, *, request_id: str) -> dict[str, int]:
    return {"refunded": amount}


def _charges() -> Workflow:
    """Three charges of ``amount`` times the step: a journal of three entries."""
    wf = Workflow("import-races")

    @wf.step(entry=True)
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        receipt = ctx.call(race_charge, state["amount"] * n)
        return {"amount": state["amount"], "n": n, "last": receipt}, "charge" if n < 3 else END

    return wf


def _refunds() -> Workflow:
    """A refund that waits for a person: a run that is not finished."""
    wf = Workflow("import-threads")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = ctx.call(race_refund, state.get("amount", 5))
        return {"turns": state.get("turns", 0) + 1, "refund": done}, END

    return wf


def _journal(run_id: str, store: str, storage: StorageConfig | None = None) -> list[Any]:
    return [
        (e.request_id, e.status, e.arguments, e.result)
        for e in savegame.client.list_effects(run_id, store=store, storage=storage)
    ]


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """Two export files of one run id, ``order-7``, with other journals (charges of 10 and
    99); and the store the first came from."""
    tmp = tmp_path_factory.mktemp("exports")
    paths = []
    for amount in (10, 99):
        source = f"sqlite:///{tmp / f'src{amount}.db'}"
        savegame.run(_charges(), {"amount": amount}, store=source, run_id="order-7")
        savegame.client.export_run("order-7", tmp / f"order{amount}.sgx", store=source)
        paths.append(tmp / f"order{amount}.sgx")
    return paths[0], paths[1], f"sqlite:///{tmp / 'src10.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'target.db'}"
        return
    with postgres_schema() as schema:
        yield postgres_url(schema)


#: ``savegame import ARGS...`` whose store holds it after its second journal write (the run
#: created, one entry written) until the file ``go`` appears (a minute at most).
HELD = textwrap.dedent(
    """
    import runpy, sys, time
    from pathlib import Path
    from savegame.stores import open_store

    held, go, url = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    opened = open_store(url)
    cls = type(opened)
    opened.close()
    real, calls = cls.record_intent, []

    def record_intent(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            held.touch()
            deadline = time.monotonic() + 60
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return real(self, *args, **kwargs)

    cls.record_intent = record_intent
    sys.argv = ["savegame", "import", *sys.argv[4:], "--store", url]
    runpy.run_module("savegame", run_name="__main__")
    """
)


def _savegame(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_second_import_of_a_run_being_imported_is_refused_and_the_first_lands_whole(
    tmp_path: Path, two_files: tuple[Path, Path, str], target: str
) -> None:
    first_file, second_file, source = two_files
    held, go = tmp_path / "held", tmp_path / "go"
    first = subprocess.Popen(
        [sys.executable, "-c", HELD, str(held), str(go), target, str(first_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not held.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held.exists(), first.communicate()
        second = _savegame("import", str(second_file), "--store", target)
        go.touch()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    # The second is refused while the first writes, naming it; it wrote nothing.
    assert second.returncode == 1, second.stdout
    assert "run order-7 exists already" in second.stderr
    assert f"another import is writing it (savegame-import:{socket.gethostname()}:" in (
        second.stderr
    )
    assert f":{first.pid}:" in second.stderr
    # What the first reported imported is there, whole: its file's journal and state.
    assert first.returncode == 0, err
    assert "imported run order-7" in out
    assert _journal("order-7", target) == _journal("order-7", source)
    state = savegame.client.get_checkpoint("order-7", store=target).state
    assert state == savegame.client.get_checkpoint("order-7", store=source).state
    assert savegame.client.verify(store=target).ok
    assert (
        savegame.client.get_run("order-7", store=target).lease is None
    )  # released: nobody holds it


def _holding(url: str, run_id: str, owner: str, renewed_ago: float) -> int:
    """Make ``owner`` hold ``run_id`` as an import whose last renewal was ``renewed_ago``
    seconds ago; its fencing token."""
    store = open_store(url)
    try:
        return store.acquire_lease(run_id, owner, IMPORT_TTL - renewed_ago).token
    finally:
        store.close()


@pytest.mark.parametrize(
    ("owner", "renewed_ago", "alive"),
    [
        # On another host: alive while it renews, a leftover once it has not for STALE s.
        ("savegame-import:elsewhere:4242:17", 1.0, True),
        ("savegame-import:elsewhere:4242:17", STALE + 5, False),
        # An import by an older savegame, which named no process: the same by its renewal.
        ("savegame-import", 1.0, True),
        ("savegame-import", STALE + 5, False),
        # On this host its process is looked at, however long ago it renewed.
        ("savegame-import:{host}:{me}:{start}", STALE + 5, True),
        ("savegame-import:{host}:{dead}:0", 1.0, False),
    ],
)
def test_an_import_lease_is_a_leftover_only_once_its_process_is_dead(
    tmp_path: Path, two_files: tuple[Path, Path, str], owner: str, renewed_ago: float, alive: bool
) -> None:
    first_file, second_file, _ = two_files
    url = f"sqlite:///{tmp_path / 'target.db'}"
    savegame.client.import_run(first_file, store=url)
    before = _journal("order-7", url)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = owner.format(
        host=socket.gethostname(), me=os.getpid(), start=owner_id().rsplit(":", 1)[1],
        dead=dead.pid,
    )  # fmt: skip
    token = _holding(url, "order-7", owner, renewed_ago)
    if alive:
        with pytest.raises(RunExistsError, match="another import is writing it"):
            savegame.client.import_run(second_file, store=url)
        assert _journal("order-7", url) == before  # nothing of the second file
        return
    savegame.client.import_run(second_file, store=url)
    charged = [e[2]["amount"] for e in _journal("order-7", url)]
    assert charged == [99, 198, 297]  # the second file's, whole
    assert savegame.client.verify(store=url).ok
    # The run was made anew, its token moved past the leftover's: a writer of the
    # replaced run that is still about is refused.
    store = open_store(url)
    try:
        entry = store.list_effects("order-7", limit=ALL_EFFECTS)[0]  # as stored
        with pytest.raises(LeaseLostError):
            store.record_intent(replace(entry, request_id="order-7:ghost:0"), lease_token=token)
    finally:
        store.close()


# -- threads -----------------------------------------------------------------------------------


@pytest.fixture
def waiting_export(tmp_path: Path) -> Path:
    """A run ``file-run`` on thread ``support-42`` waiting for a refund's approval, exported
    from an encrypted store."""
    source = f"sqlite:///{tmp_path / 'source.db'}"
    first = savegame.run(
        _refunds(), {"amount": 7}, store=source, run_id="file-run", thread_id="support-42",
        storage=SEALED,
    )  # fmt: skip
    assert first.status is RunStatus.INTERRUPTED
    savegame.client.export_run("file-run", tmp_path / "file-run.sgx", store=source)
    return tmp_path / "file-run.sgx"


def test_a_run_on_a_thread_the_store_has_is_refused_naming_both(
    tmp_path: Path, waiting_export: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    savegame.run(_charges(), {"amount": 1}, store=target, run_id="own-run",
                 thread_id="support-42", storage=SEALED)  # fmt: skip
    with pytest.raises(ThreadExistsError) as refused:
        savegame.client.import_run(waiting_export, store=target, storage=SEALED)
    assert (refused.value.thread_id, refused.value.run_id, refused.value.imported_run_id) == (
        "support-42", "own-run", "file-run",
    )  # fmt: skip
    assert "--thread" in str(refused.value)
    assert [r.run_id for r in savegame.client.list_runs(store=target)] == [
        "own-run"
    ]  # nothing written


def test_thread_imports_the_runs_into_a_new_thread_and_both_go_on(
    tmp_path: Path, waiting_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    savegame.run(_charges(), {"amount": 1}, store=target, run_id="own-run",
                 thread_id="support-42", storage=SEALED)  # fmt: skip
    monkeypatch.setenv("SAVEGAME_KEYS", f"imp:{base64.b64encode(RING.key('imp', 'test')).decode()}")
    done = _savegame("import", str(waiting_export), "--store", target, "--thread", "support-42-b")
    assert done.returncode == 0, done.stderr
    moved = savegame.client.get_run("file-run", store=target, storage=SEALED)
    assert moved.thread_id == "support-42-b"
    history = savegame.client.history("file-run", store=target, storage=SEALED)
    assert {h.thread_id for h in history} == {"support-42-b"}
    assert savegame.client.verify(store=target, storage=SEALED).ok  # checks remade under the key
    # support-42 goes on from its own run, not blocked by the imported one ...
    turn = savegame.run(_charges(), {"amount": 2}, store=target, thread_id="support-42",
                        storage=SEALED)  # fmt: skip
    assert turn.status is RunStatus.COMPLETED
    # ... and the imported run goes on in its new thread.
    savegame.approve("file-run", store=target, storage=SEALED, resume=False)
    resumed = savegame.resume("file-run", store=target, workflow=_refunds(), storage=SEALED)
    assert resumed.status is RunStatus.COMPLETED
    assert resumed.state["refund"] == {"refunded": 7}


# -- a decompression bomb nested in a record ---------------------------------------------------

#: What the bombs below state they unpack to.
BOMB = 1536 << 20
#: What the import may take at its peak: Python, savegame and a store (about 100 MB here);
#: far from the bomb's size, which it took before the nested frames were bounded.
PEAK = 400 << 20


#: Starts ``savegame import`` (its arguments after the first) capped at an address space
#: of the first, and prints its exit code and peak resident bytes. A small process of its
#: own: a child forked from the test's process starts with that process's pages counted
#: in its peak (an xdist worker at 404 MiB after other tests failed both tests below).
_SPAWN = textwrap.dedent(
    """
    import os, resource, subprocess, sys

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2)

    child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, preexec_fn=cap)
    _, status, usage = os.wait4(child.pid, 0)
    print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)  # Linux: kilobytes
    """
)


def _peak_import(path: Path, store: str) -> tuple[int, str, int]:
    """``savegame import`` in its own process: exit code, stderr, peak resident bytes (from
    the kernel, ``wait4``). Its address space is capped at twice the bomb, so a regression
    fails the test rather than the machine."""
    done = subprocess.run(
        [
            sys.executable, "-c", _SPAWN, str(2 * BOMB + (1 << 30)),
            sys.executable, "-m", "savegame", "import", str(path), "--store", store,
        ],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    code, peak = done.stdout.split()
    return int(code), done.stderr, int(peak)


def test_a_blob_that_unpacks_to_gigabytes_is_refused_before_it_is_unpacked(
    tmp_path: Path,
) -> None:
    """A 419-byte file: a blob record whose bytes are zstd again, stating 1.5 GiB (found
    by an adversarial review: a 464-byte file reached 4.2 GB of memory)."""
    stored = b"SGB\x01" + bytes([1, 0]) + zeros_frame(BOMB)  # a plain blob, zstd
    counts = {"runs": 0, "records": 0, "effects": 0, "blobs": 1}
    header = {"type": "header", "format": "savegame-export", "version": 1, "counts": counts}
    blob = {"type": "blob", "digest": "0" * 64, "data": base64.b64encode(stored).decode()}
    (tmp_path / "bomb.sgx").write_bytes(written([header, blob]))
    assert (tmp_path / "bomb.sgx").stat().st_size < 1000
    code, err, peak = _peak_import(tmp_path / "bomb.sgx", f"sqlite:///{tmp_path / 't.db'}")
    assert peak < PEAK, f"peak {peak / 2**20:.0f} MiB"
    assert code == 9, err  # damaged data
    assert f"blob {'0' * 64}" in err and f"states {BOMB:,} bytes" in err


def test_a_checkpoint_payload_that_unpacks_to_gigabytes_is_refused_the_same(
    tmp_path: Path, two_files: tuple[Path, Path, str]
) -> None:
    """The same bomb as a checkpoint's payload, its record's checksum recomputed (no keys:
    the forger can), so only the frame's stated size stands in the way."""
    bombed: list[str] = []

    def bomb(obj: dict[str, Any]) -> None:
        record = obj["record"]
        header = _archive.from_json(CheckpointHeader, record["header"])
        flags = _envelope.ZSTD | (_envelope.DELTA if header.base_id else 0)
        payload = _envelope._MAGIC + bytes([2, flags, 0]) + zeros_frame(BOMB)
        record["payload"] = base64.b64encode(payload).decode()
        record["checksum"] = _envelope._checksum2(header, payload)
        bombed.append(header.checkpoint_id)

    path = tmp_path / "bomb.sgx"
    path.write_bytes(forged(two_files[0].read_bytes(), on("checkpoint", bomb, once=True)))
    code, err, peak = _peak_import(path, f"sqlite:///{tmp_path / 't.db'}")
    assert peak < PEAK, f"peak {peak / 2**20:.0f} MiB"
    assert code == 9, err
    assert f"record {bombed[0]}" in err and f"states {BOMB:,} bytes" in err

"""An import killed with SIGKILL at any write leaves nothing anyone can resume into a
repeated side effect, and importing the file again brings the run whole."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from savegame import RunStatus, approve, resume, run
from savegame.client import export_run, import_run, list_effects, verify
from savegame.errors import LeaseHeldError, RunStateError

HERE = Path(__file__).parent

pytestmark = pytest.mark.crash

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from savegame.client import import_run
    from savegame.stores import open_store

    method, nth, url, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    store = open_store(url)
    real = getattr(store, method)
    calls = []

    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            os.kill(os.getpid(), signal.SIGKILL)  # in the middle of the import's writes
        return real(*args, **kwargs)

    setattr(store, method, dying)
    import_run(path, store=store)
    """
)


@pytest.mark.parametrize(
    ("method", "nth"),
    [("record_intent", 1), ("record_intent", 2), ("put_checkpoint", 1), ("put_checkpoint", 2)],
)
def test_an_import_killed_midway_is_replaced_by_the_next_and_never_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, nth: int
) -> None:
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("SAVEGAME_LEDGER", str(ledger))
    monkeypatch.syspath_prepend(str(HERE))
    from import_workload import wf  # type: ignore[import-not-found]

    source, target = f"sqlite:///{tmp_path / 'src.db'}", f"sqlite:///{tmp_path / 'dst.db'}"
    waiting = run(wf, {}, store=source, run_id="r5")
    assert waiting.status is RunStatus.INTERRUPTED  # charged, the credit waits for a person
    export_run("r5", tmp_path / "r5.sgx", store=source)
    assert ledger.read_text() == "charge 4242 5\n"

    killed = subprocess.run(
        [sys.executable, "-c", CHILD, method, str(nth), target, str(tmp_path / "r5.sgx")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])},
        check=False,
    )
    assert killed.returncode == -9
    # What the kill left is held by the import: nobody resumes it into a second charge.
    with contextlib.suppress(RunStateError):  # its approval may not be imported yet
        approve("r5", store=target, resume=False)
    with pytest.raises((LeaseHeldError, RunStateError)):
        resume("r5", store=target, workflow=wf)
    assert ledger.read_text() == "charge 4242 5\n"

    # The next import of the file replaces it, whole.
    import_run(tmp_path / "r5.sgx", store=target)
    assert [e.request_id for e in list_effects("r5", store=target)] == [
        e.request_id for e in list_effects("r5", store=source)
    ]
    assert verify(store=target).ok
    approve("r5", store=target, resume=False)
    done = resume("r5", store=target, workflow=wf)
    assert done.status is RunStatus.COMPLETED
    assert ledger.read_text() == "charge 4242 5\ncredit acc 7\n"  # charged once

"""A run records the code version it started under; workers claim only runs of theirs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Store, Worker, Workflow, run, submit
from savegame.client import fork, history
from savegame.codec import verify_run
from savegame.errors import ConfigurationError, CorruptRecordError
from savegame.model import VERSION_KEY
from savegame.runtime._versions import DERIVED
from savegame.stores import SqliteStore
from tests.runtime import version_flows
from tests.runtime.version_flows import DERIVED as DERIVED_WF
from tests.runtime.version_flows import V1, V2, hello_v2


def test_a_run_records_its_declared_version_in_its_row_and_first_checkpoint(store: Store) -> None:
    res = run(V1, store=store)
    info = store.get_run(res.run_id)
    assert info.version == "v1" and info.metadata[VERSION_KEY] == "v1"
    first = next(reversed(history(res.run_id, store=store)))
    assert first.step == 0 and first.metadata[VERSION_KEY] == "v1"


def test_the_version_is_under_the_row_s_check(store: Store) -> None:
    info = store.get_run(run(V1, store=store).run_id)
    forged = type(info)(**{**{f: getattr(info, f) for f in info.__dataclass_fields__},
                           "metadata": {**info.metadata, VERSION_KEY: "v2"}})  # fmt: skip
    with pytest.raises(CorruptRecordError):
        verify_run(forged, None)


def test_a_derived_version_is_a_digest_of_the_steps_source() -> None:
    version = DERIVED_WF.code_version
    assert version.startswith(DERIVED) and len(version) == len(DERIVED) + 12
    assert DERIVED_WF.version is None
    # The same code in another process (another hash seed, another import): the same.
    code = "from tests.runtime.version_flows import DERIVED; print(DERIVED.code_version)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": ":".join(sys.path), "PYTHONHASHSEED": "123"},
    )  # fmt: skip
    assert out.stdout.strip() == version
    # Other code under the same names: another version.
    other = Workflow("derived")

    @other.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"n": state.get("n", 0) + 2}, END

    assert other.code_version.startswith(DERIVED) and other.code_version != version


def test_a_derived_version_follows_steps_added_later() -> None:
    wf = Workflow("grows")

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, "two"

    before = wf.code_version

    @wf.step
    def two(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    assert wf.code_version != before


@pytest.mark.parametrize("bad", ["", " v1", "v\n1", "x" * 201, 3])
def test_a_declared_version_must_be_a_printable_string(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="version"):
        Workflow("w", version=bad)


def test_the_version_key_is_savegame_s(store: Store) -> None:
    with pytest.raises(ConfigurationError, match=VERSION_KEY):
        run(V1, metadata={VERSION_KEY: "v0"}, store=store)


def test_a_fork_records_the_version_of_the_code_it_runs(store: Store) -> None:
    origin = run(V1, store=store)
    first = next(reversed(history(origin.run_id, store=store)))
    forked = fork(first.checkpoint_id, store=store, workflow=V2)
    assert store.get_run(forked.run_id).version == "v2"
    assert forked.result is not None and forked.result.state["by"] == "v2"


def test_a_worker_claims_only_runs_of_its_version_or_those_it_declares_compatible(
    tmp_path: Path,
) -> None:
    with SqliteStore(tmp_path / "fleet.db") as store:
        old = [submit(V1, store=store).run_id for _ in range(2)]
        new = submit(V2, store=store).run_id
        stats = Worker(store, poll=0.01, version="v2").run(idle_exit=0.2)
        assert set(stats.finished) == {new}
        assert store.get_run(new).status is RunStatus.COMPLETED
        assert {store.get_run(r).status for r in old} == {RunStatus.QUEUED}
        # A v3 worker that continues v1 runs: they go to it, run by its code (V1 imported
        # from each run's reference, here the same module).
        stats = Worker(store, poll=0.01, version="v3", compatible_versions=["v1"]).run(
            idle_exit=0.2
        )
        assert set(stats.finished) == set(old)


def test_compatible_versions_need_the_worker_s_own(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="version="):
        Worker(f"sqlite:///{tmp_path / 'w.db'}", compatible_versions=["v1"])
    with pytest.raises(ConfigurationError, match="list of versions"):
        Worker(f"sqlite:///{tmp_path / 'w.db'}", version="v2", compatible_versions="v1")  # type: ignore[arg-type]
    assert Worker(None, version="v2", compatible_versions=["v1", "v2"]).versions == ["v2", "v1"]


def test_an_agent_takes_a_version_too() -> None:
    from savegame import Agent

    class Quiet:
        name = "quiet"

        def complete(self, messages: Any, tools: Any) -> Any:  # pragma: no cover - not called
            raise AssertionError

    assert Agent("helper", Quiet(), version="v7").workflow.code_version == "v7"
    derived = Agent("helper", Quiet()).workflow.code_version
    assert derived.startswith(DERIVED) and derived == Agent("other", Quiet()).workflow.code_version


def test_a_worker_says_once_when_its_code_is_not_of_the_version_it_claims(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteStore(tmp_path / "fleet.db") as store:
        runs = [submit(V2, store=store).run_id for _ in range(2)]
        # The operator deployed v3 but started its worker as `--version v2`: the runs it
        # claims import as v3 (the same reference, the new release's code).
        v3 = Workflow("greet", version="v3")
        v3.add_step(hello_v2, name="hello", entry=True)
        monkeypatch.setattr(version_flows, "V2", v3)
        with caplog.at_level("WARNING", logger="savegame.worker"):
            stats = Worker(store, poll=0.01, version="v2").run(idle_exit=0.2)
        assert set(stats.finished) == set(runs)  # the runs go on: the code is what was deployed
        assert caplog.text.count("imports here as version v3: give the worker") == 1
        # Its own version's code: not a word.
        caplog.clear()
        submit(V1, store=store)
        with caplog.at_level("WARNING", logger="savegame.worker"):
            Worker(store, poll=0.01, version="v1").run(idle_exit=0.2)
        assert "imports here as version" not in caplog.text

"""Attacks on versioned runs and workers (issue 33 point 2): hostile version strings, a
version column edited behind the store's back on SQLite and PostgreSQL, filters that a
LIKE or a quote could widen, and workers of two versions racing for one queue."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Worker, Workflow, submit
from savegame.errors import ConfigurationError
from savegame.model import VERSION_KEY
from savegame.stores import SqliteStore, open_store
from tests import services
from tests.adversarial.conftest import Raw
from tests.runtime import test_worker_sagas as sagas
from tests.runtime.version_flows import V1, V2

HOSTILE = ["v\n1", "v1\x00", " v1", "v1 ", "x" * 10_000, "", "v\u202e1"]
"""Versions no run or worker may carry: a newline (a log line forged), a NUL, spaces at
the ends (``v1 `` would look like ``v1``), 10 KB, nothing, a right-to-left override."""

SLY = ["v1' OR '1'='1", "v%", "v_", "v1;--", 'v"1', "v1\\", "[v1]", "*"]
"""Versions that are fine as text but would widen a filter built by pasting: a quote, LIKE
wildcards, a comment, a JSON array's brackets, a glob."""


def _flow(version: str) -> Workflow:
    wf = Workflow("sly", version=version)

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"ran": version}, END

    return wf


@pytest.mark.parametrize("version", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_version_is_refused_by_a_workflow_and_a_worker(
    version: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError):
        Workflow("hostile", version=version)
    with SqliteStore(tmp_path / "w.db") as store:
        with pytest.raises(ConfigurationError):
            Worker(store, version=version)
        with pytest.raises(ConfigurationError):
            Worker(store, version="v1", compatible_versions=[version])
        with pytest.raises(ConfigurationError):
            submit(V1, store=store, metadata={VERSION_KEY: version})


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "redis"])
def test_a_version_that_would_widen_a_pasted_filter_claims_only_its_own_runs(
    backend: str, tmp_path: Path
) -> None:
    with services.BACKENDS[backend](tmp_path) as url, open_store(url) as store:
        ids = {v: submit(_flow(v), store=store).run_id for v in [*SLY, "v1", "v2", "vx"]}
        assert store.claim_run("nobody", 30.0, versions=[]) is None  # empty: none
        for version in SLY:
            lease = store.claim_run(f"w-{version}", 30.0, versions=[version])
            assert lease is not None and lease.run_id == ids[version], version
            assert store.claim_run(f"w-{version}", 30.0, versions=[version]) is None, version
        left = {store.get_run(i).version for i in ids.values() if store.get_run(i).lease is None}
        assert left == {"v1", "v2", "vx"}


def test_a_postgres_row_edited_to_another_version_is_not_run_by_that_version(raw: Raw) -> None:
    # tests/adversarial/test_version_column.py holds this on SQLite; the same on both SQL stores.
    with open_store(raw.url) as store:
        run_id = submit(V1, store=store).run_id
    raw.execute("UPDATE runs SET version = 'v2' WHERE run_id = ?", (run_id,))
    with open_store(raw.url) as store:
        stats = Worker(store, poll=0.01, version="v2", backoff=60).run(idle_exit=0.2)
        assert stats.finished == {} and "damaged" in stats.errors[run_id]
        assert store.get_run(run_id).status is RunStatus.QUEUED
        assert store.latest_checkpoint(run_id).header.step == 0  # no step ran


def test_two_workers_of_two_versions_racing_run_each_run_under_its_own_code(raw: Raw) -> None:
    url = raw.url
    with open_store(url) as store:
        ids = {submit(V1 if n % 2 else V2, store=store).run_id: "v1" if n % 2 else "v2"
               for n in range(16)}  # fmt: skip
    stats: dict[str, Any] = {}

    def work(version: str) -> None:
        with open_store(url) as store:
            worker = Worker(store, poll=0.01, version=version, concurrency=2)
            stats[version] = worker.run(idle_exit=0.5)

    threads = [threading.Thread(target=work, args=(v,)) for v in ("v1", "v2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not stats["v1"].errors and not stats["v2"].errors
    with open_store(url) as store:
        for run_id, version in ids.items():
            done = store.latest_checkpoint(run_id)
            assert done.header.status is RunStatus.COMPLETED, run_id
            assert run_id in stats[version].finished, (run_id, version)
    assert set(stats["v1"].finished).isdisjoint(stats["v2"].finished)


def test_a_half_done_saga_whose_version_was_edited_is_left_by_the_wrong_worker(
    raw: Raw,
) -> None:
    # The saga finisher picks runs by their version too: an edited column does not make a
    # worker of another release undo them with its code, nor does edited metadata (which
    # the row's check covers).
    sagas.done.clear()
    with open_store(raw.url) as store:
        run_id = sagas.half_compensated(store)  # type: ignore[arg-type]
        version = store.get_run(run_id).version
    raw.execute("UPDATE runs SET version = 'other' WHERE run_id = ?", (run_id,))
    with open_store(raw.url) as store:
        Worker(store, poll=0.01, version="other", schedules=False).run(idle_exit=0.3)
        assert store.get_run(run_id).status is RunStatus.COMPENSATING
    [(meta,)] = raw.execute("SELECT metadata FROM runs WHERE run_id = ?", (run_id,))
    text = meta if isinstance(meta, (str, bytes)) else json.dumps(meta)
    text = text.decode() if isinstance(text, bytes) else text
    assert version is not None and f'"{version}"' in text
    edited = text.replace(f'"{version}"', '"other"')
    cast = "?::jsonb" if raw.kind == "postgres" and isinstance(meta, dict) else "?"
    raw.execute(f"UPDATE runs SET metadata = {cast} WHERE run_id = ?", (edited, run_id))
    with open_store(raw.url) as store:
        stats = Worker(store, poll=0.01, version="other", schedules=False).run(idle_exit=0.3)
        assert store.get_run(run_id).status is RunStatus.COMPENSATING
        assert "checksum" in stats.errors.get(run_id, ""), stats.errors
    assert sum(n for k, n in sagas.done.items() if k.startswith("release")) == 1  # the stopped one

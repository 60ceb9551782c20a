"""savegame send, and resume of a run that waits for an event, on real SQLite files."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

HOOK = textwrap.dedent(
    """
    from savegame import END, Workflow

    hook = Workflow("hook")


    @hook.step(entry=True)
    def wait_step(state, ctx):
        return {"order": ctx.wait_for("paid")}, END
    """
)


@pytest.fixture
def hook(tmp_path: Path) -> Path:
    path = tmp_path / "hook_flow.py"
    path.write_text(HOOK)
    return path


def test_send_wakes_a_waiting_run_once_per_key(cli: Any, hook: Path, store: str) -> None:
    out = cli("run", f"{hook}:hook", "--run-id", "h1", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "waiting for: event 'paid'" in out.stdout
    assert "savegame resume h1" in out.stdout
    refused = cli("resume", "h1", "--store", store)
    assert refused.exit_code == 4 and "waits for event 'paid'" in refused.stderr

    sent = cli("send", "h1", "paid", '{"id": 7}', "--key", "evt_1", "--store", store, "--json")
    assert sent.exit_code == 0, sent.stderr
    assert (sent.json()["delivered"], sent.json()["woken"]) == (True, True)
    again = cli("send", "h1", "paid", '{"id": 8}', "--key", "evt_1", "--store", store)
    assert again.exit_code == 0 and "dropped" in again.stdout

    done = cli("resume", "h1", "--store", store, "--json")
    assert done.exit_code == 0, done.stderr
    assert (done.json()["status"], done.json()["state"]) == ("completed", {"order": {"id": 7}})


def test_send_refuses_bad_json_and_a_finished_run(cli: Any, hook: Path, store: str) -> None:
    cli("run", f"{hook}:hook", "--run-id", "h2", "--store", store)
    bad = cli("send", "h2", "paid", "{nope", "--store", store)
    assert bad.exit_code == 2 and "not valid JSON" in bad.stderr
    assert cli("send", "h2", "paid", "1", "--store", store).exit_code == 0
    assert cli("resume", "h2", "--store", store).exit_code == 0
    late = cli("send", "h2", "paid", "2", "--store", store)
    assert late.exit_code == 4 and "completed" in late.stderr
    assert cli("send", "nope", "paid", "1", "--store", store).exit_code == 3


def test_runs_lists_a_waiting_run_with_its_wake_time(cli: Any, hook: Path, store: str) -> None:
    cli("run", f"{hook}:hook", "--run-id", "h3", "--store", store)
    listed = cli("runs", "--status", "waiting", "--store", store, "--json")
    assert listed.exit_code == 0, listed.stderr
    (row,) = [r for r in _rows(listed.stdout)]
    assert (row["run_id"], row["status"], row["wake_at"]) == ("h3", "waiting", None)
    cli("send", "h3", "paid", "1", "--store", store)
    (woken,) = _rows(cli("runs", "--status", "waiting", "--store", store, "--json").stdout)
    assert woken["wake_at"].startswith("1970-01-01")


def _rows(text: str) -> list[Any]:
    import orjson

    value = orjson.loads(text)
    return value if isinstance(value, list) else [value]

"""tree, fork and the fork marks of history and effects, through the real command line:
the time-travel guide's worked example (a refund sent with a bad amount, fixed by a fork)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

REFUNDS = textwrap.dedent(
    """
    import os

    from savegame import END, Workflow, tool

    LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ledger.txt")


    def world(line):
        with open(LEDGER, "a") as f:
            f.write(line + "\\n")


    @tool(effect="read")
    def tt_find_order(order_id):
        world(f"find {order_id}")
        return {"id": order_id, "total": 120}


    @tool(effect="write", idempotent=True)
    def tt_send_refund(order_id, amount, *, request_id):
        world(f"refund {order_id} {amount}")
        return {"refund": f"RF-{order_id}-{amount}"}


    wf = Workflow("refunds")


    @wf.step(entry=True)
    def look(state, ctx):
        order = ctx.call(tt_find_order, order_id=state["order_id"])
        return {"order": order}, "refund"


    @wf.step
    def refund(state, ctx):
        receipt = ctx.call(tt_send_refund, order_id=state["order_id"], amount=state["amount"])
        return {"receipt": receipt["refund"]}, END
    """
)


@pytest.fixture
def refunds(tmp_path: Path) -> str:
    path = tmp_path / "refunds_flow.py"
    path.write_text(REFUNDS)
    return f"{path}:wf"


def _ledger(tmp_path: Path) -> list[str]:
    return (tmp_path / "ledger.txt").read_text().splitlines()


def _bad_refund(cli: Any, refunds: str, store: str) -> tuple[str, str]:
    out = cli(
        "run", refunds, "--input", '{"order_id": "A-1", "amount": 1200}', "--store", store, "--json"
    )
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    first = cli("history", run_id, "--store", store, "--json").json()[-1]
    return run_id, first["checkpoint_id"]


def test_fork_fixes_a_bad_argument_and_replays_the_rest(
    cli: Any, refunds: str, store: str, tmp_path: Path
) -> None:
    run_id, start = _bad_refund(cli, refunds, store)
    out = cli(
        "fork", start, "--set", "amount=120", "--reason", "typo in the amount", "--by", "ana",
        "--yes", "--store", store, "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    body = out.json()
    assert [c["name"] for c in body["reused"]] == ["tt_find_order"]
    assert [c["name"] for c in body["executed"]] == ["tt_send_refund"]
    assert (body["diverged_at"]["step"], body["diverged_at"]["call_index"]) == (2, 0)
    assert body["result"]["state"]["receipt"] == "RF-A-1-120"
    # The order was looked up once; the refund with the fixed amount is the only new call.
    assert _ledger(tmp_path) == ["find A-1", "refund A-1 1200", "refund A-1 120"]

    effects = cli("effects", body["run_id"], "--store", store, "--json").json()
    assert [(e["name"], e["replay"]) for e in effects] == [
        ("tt_find_order", "reused"), ("tt_send_refund", "executed"),
    ]  # fmt: skip
    tree = cli("tree", run_id, "--store", store, "--json").json()
    (root,) = tree["runs"]
    assert root["run_id"] == run_id and root["forked"] is False
    (child,) = root["children"]
    assert child["run_id"] == body["run_id"] and child["forked"] is True
    assert (child["parent_checkpoint_id"], child["by"], child["reason"], child["edited"]) == (
        start, "ana", "typo in the amount", ["amount"],
    )  # fmt: skip
    marks = {
        h["checkpoint_id"]: h["forks"]
        for h in cli("history", run_id, "--store", store, "--json").json()
    }
    assert marks[start] == [body["run_id"]]


def test_tree_and_history_draw_the_forks(cli: Any, refunds: str, store: str) -> None:
    run_id, start = _bad_refund(cli, refunds, store)
    forked = cli("fork", start, "--set", "amount=120", "--by", "ana", "--yes", "--store", store)
    assert forked.exit_code == 0, forked.stderr
    assert "diverged at step 2, call 0 (refund: tt_send_refund)" in forked.stdout
    assert "reused    1 call from the journal" in forked.stdout
    drawn = cli("tree", run_id, "--store", store)
    assert drawn.exit_code == 0, drawn.stderr
    assert f"run {run_id}" in drawn.stdout and "⑂ fork of step 0 (replay, by ana" in drawn.stdout
    history = cli("history", run_id, "--store", store)
    assert "⑂ " in history.stdout


def test_fork_asks_before_writes_may_run_again(
    cli: Any, refunds: str, store: str, tmp_path: Path
) -> None:
    _run_id, start = _bad_refund(cli, refunds, store)
    out = cli("fork", start, "--mode", "redo", "--store", store)
    assert out.exit_code != 0
    assert "redo runs 1 recorded write again" in out.stdout
    assert "--yes" in out.stderr
    assert len(cli("runs", "--store", store, "--json").json()) == 1
    assert _ledger(tmp_path) == ["find A-1", "refund A-1 1200"]


def test_fork_refuses_a_set_without_a_value(cli: Any, refunds: str, store: str) -> None:
    _, start = _bad_refund(cli, refunds, store)
    out = cli("fork", start, "--set", "amount", "--yes", "--store", store)
    assert out.exit_code != 0 and "PATH=JSON" in out.stderr


def test_fork_without_running_then_resume(
    cli: Any, refunds: str, store: str, tmp_path: Path
) -> None:
    _, start = _bad_refund(cli, refunds, store)
    out = cli("fork", start, "--no-run", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    fork_id = out.json()["run_id"]
    assert out.json()["result"] is None
    resumed = cli("resume", fork_id, "--store", store, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["state"]["receipt"] == "RF-A-1-1200"
    assert _ledger(tmp_path) == ["find A-1", "refund A-1 1200"]

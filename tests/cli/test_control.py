"""effects / approvals / approve / reject / resume --value / resolve / cancel / compensate, on real SQLite files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from savegame.codec import from_data

EFFECT_FIELDS = {
    "request_id",
    "kind",
    "name",
    "step",
    "node",
    "status",
    "arguments",
    "result",
    "error",
}
PENDING_FIELDS = {"run_id", "interrupt_id", "kind", "name", "payload", "step", "node", "created_at"}


def ledger(shop: Path) -> list[str]:
    path = shop.parent / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def start(cli: Any, shop: Path, store: str, flow: str, run_id: str, **state: Any) -> Any:
    import orjson

    args = ["run", f"{shop}:{flow}", "--run-id", run_id, "--store", store, "--json"]
    out = cli(*args, "--input", orjson.dumps(state).decode())
    assert out.exit_code == 0, out.stderr
    return out.json()


def test_a_run_that_waits_for_approval_says_how_to_continue(
    cli: Any, shop: Path, store: str
) -> None:
    out = cli(
        "run",
        f"{shop}:refunds",
        "--run-id",
        "r1",
        "--store",
        store,
        "--input",
        '{"order_id": "A", "amount": 500}',
    )
    assert out.exit_code == 0, out.stderr
    assert "run r1 paused: interrupted after 0 steps" in out.stdout
    assert "waiting for approval: refund(amount=500, order_id='A')" in out.stdout
    assert "interrupt  r1:1:0:approval" in out.stdout
    assert f"savegame approve r1 --store {store} [--edit JSON]" in out.stdout
    assert f"savegame reject r1 --store {store} --reason TEXT" in out.stdout
    assert ledger(shop) == []

    result = cli("resume", "r1", "--store", store, "--json")
    assert result.exit_code == 4
    assert orjson.loads(result.stderr) == {  # with --json the error is JSON too
        "error": "cannot resume run r1: it is interrupted: it waits for approval of refund "
        "(r1:1:0:approval): approve or reject it",
        "code": 4,
        "type": "RunStateError",
    }


def test_approvals_lists_what_waits_across_runs(cli: Any, shop: Path, store: str) -> None:
    paused = start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    assert (paused["status"], paused["interrupt_id"]) == ("interrupted", "r1:1:0:approval")
    assert [p["interrupt_id"] for p in paused["pending"]] == ["r1:1:0:approval"]
    start(cli, shop, store, "ask", "q1")
    start(cli, shop, store, "refunds", "small", order_id="B", amount=5)

    items = cli("approvals", "--store", store, "--json").json()
    assert [(p["run_id"], p["kind"], p["name"]) for p in items] == [
        ("r1", "approval", "refund"),
        ("q1", "interrupt", "plan"),
    ]
    assert all(set(p) >= PENDING_FIELDS for p in items)
    assert items[0]["payload"] == {"order_id": "A", "amount": 500}
    assert items[1]["payload"] == {"question": "Which plan?"}
    only = cli("approvals", "--run", "q1", "--store", store, "--json").json()
    assert [p["interrupt_id"] for p in only] == ["q1:1:0"]

    table = cli("approvals", "--store", store)
    assert table.exit_code == 0
    assert "r1:1:0:approval" in table.stdout and "q1:1:0" in table.stdout
    assert '{"amount":500,"order_id":"A"}' in table.stdout
    # Numbered as history numbers the checkpoint the run waits at (step 0, the input's),
    # not as the journal numbers the step that asked (1, in the interrupt id).
    [head] = cli("history", "r1", "--store", store, "--json", "--limit", "1").json()
    assert (head["step"], head["status"], head["next"]) == (0, "interrupted", "refund_step")
    assert [(p["step"], p["node"]) for p in items] == [(0, "refund_step"), (0, "ask_step")]
    assert "0 -> refund_step" in table.stdout and "0 -> ask_step" in table.stdout
    assert (
        cli("approvals", "--run", "small", "--store", store).stdout
        == "nothing is waiting for a person\n"
    )


def test_approve_with_an_edit_resumes_with_the_new_arguments(
    cli: Any, shop: Path, store: str
) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli(
        "approve",
        "r1",
        "--edit",
        '{"order_id": "A", "amount": 120}',
        "--by",
        "alice",
        "--store",
        store,
        "--json",
    )
    assert out.exit_code == 0, out.stderr
    result = out.json()
    assert (result["status"], result["pending"]) == ("completed", [])
    assert result["state"]["receipt"] == {"order_id": "A", "amount": 120}
    assert ledger(shop) == ["refund A 120"]

    journal = cli("effects", "r1", "--store", store, "--json").json()
    assert all(set(e) >= EFFECT_FIELDS for e in journal)
    approval, write = journal
    assert (approval["kind"], approval["status"], approval["metadata"]["by"]) == (
        "approval",
        "done",
        "alice",
    )
    assert approval["result"] == {"approved": True, "edit": {"order_id": "A", "amount": 120}}
    assert (write["kind"], write["name"], write["status"]) == ("write", "refund", "done")
    assert write["arguments"] == {"order_id": "A", "amount": 120}
    assert write["request_id"] == "r1:1:0"


def test_approve_prints_the_decision_then_the_resumed_run(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli("approve", "r1", "--interrupt", "r1:1:0:approval", "--by", "alice", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("approved refund (r1:1:0:approval) by alice\n")
    assert "run r1 resumed and ended: completed after 1 step\n" in out.stdout
    assert ledger(shop) == ["refund A 500"]


def test_reject_reaches_the_step(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli("reject", "r1", "--reason", "over the limit", "--by", "bob", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "rejected refund (r1:1:0:approval) by bob" in out.stdout
    assert "completed" in out.stdout
    state = cli("show", "r1", "--store", store, "--json").json()["state"]
    assert state == {
        "order_id": "A",
        "amount": 500,
        "receipt": None,
        "rejected": "over the limit",
        "by": "bob",
    }
    assert ledger(shop) == []
    [decision] = cli("effects", "r1", "--store", store, "--json").json()
    assert (decision["status"], decision["error"]) == ("rejected", "over the limit")


def test_resume_with_a_value_answers_the_interrupt(cli: Any, shop: Path, store: str) -> None:
    out = cli("run", f"{shop}:ask", "--run-id", "q1", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert 'waiting for a value: plan {"question":"Which plan?"}' in out.stdout
    assert f"savegame resume q1 --store {store} --value JSON" in out.stdout

    done = cli(
        "resume",
        "q1",
        "--value",
        '{"tier": "gold", "seats": {"$sg:tuple": [1, 2]}}',
        "--store",
        store,
        "--json",
    )
    assert done.exit_code == 0, done.stderr
    assert done.json()["status"] == "completed"
    assert from_data(done.json()["state"]) == {"plan": {"tier": "gold", "seats": (1, 2)}}


def test_effects_table_shows_the_journal(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "small", order_id="B", amount=5)
    out = cli("effects", "small", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "run small: 1 journal entry (oldest first)" in out.stdout
    row = next(line.split() for line in out.stdout.splitlines() if "small:1:0" in line)
    assert row == [
        "small:1:0",
        "write",
        "refund",
        "1/refund_step",
        "done",
        *['{"amount":5,"order_id":"B"}'] * 2,
    ]


def crash_mid_charge(proc: Any, shop: Path, store: str) -> None:
    """A real process dies inside a non-idempotent write: charged, no result recorded."""
    (shop.parent / "CRASH").touch()
    out = proc(
        "run",
        "shop_flow.py:pay",
        "--run-id",
        "p1",
        "--input",
        '{"amount": 30}',
        "--store",
        store,
        cwd=shop.parent,
    )
    assert out.returncode == -9, out.stderr
    (shop.parent / "CRASH").unlink()
    assert ledger(shop) == ["charge 30"]


@pytest.mark.parametrize("done", [True, False], ids=["done", "not-done"])
def test_resolve_settles_an_in_doubt_write(
    cli: Any, proc: Any, shop: Path, store: str, done: bool
) -> None:
    crash_mid_charge(proc, shop, store)
    [entry] = cli("effects", "p1", "--store", store, "--json").json()
    assert (entry["request_id"], entry["status"], entry["result"]) == ("p1:1:0", "pending", None)

    stuck = cli("resume", "p1", "--store", store)
    assert stuck.exit_code == 5
    assert stuck.stderr.count("\n") == 1
    assert "call charge(amount=30) with request id p1:1:0 is in doubt" in stuck.stderr
    assert (
        "savegame resolve p1 --effect p1:1:0 --done --result JSON` or `--not-done" in stuck.stderr
    )
    assert cli("runs", "--store", store, "--json").json()[0]["status"] == "needs_attention"
    assert ledger(shop) == ["charge 30"]  # never a blind retry

    if done:
        args = ["--done", "--result", '{"charge_id": "ch_checked", "amount": 30}']
    else:
        args = ["--not-done"]
    out = cli("resolve", "p1", "--effect", "p1:1:0", *args, "--by", "ops", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert f"p1:1:0 (charge) settled as {'done' if done else 'not done'} by ops" in out.stdout
    assert f"next: savegame resume p1 --store {store}" in out.stdout

    result = cli("resume", "p1", "--store", store, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["status"] == "completed"
    receipt = result.json()["state"]["receipt"]
    if done:
        assert receipt == {"charge_id": "ch_checked", "amount": 30}
        assert ledger(shop) == ["charge 30"]
    else:
        assert receipt == {"charge_id": "ch_1", "amount": 30}
        assert ledger(shop) == ["charge 30", "charge 30"]  # the person said it never happened


def test_cancel_an_interrupted_run(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli("cancel", "r1", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert (out.json()["status"], out.json()["run_id"]) == ("cancelled", "r1")
    again = cli("resume", "r1", "--store", store)
    assert (again.exit_code, again.stderr) == (4, "error: cannot resume run r1: it is cancelled\n")
    human = cli("cancel", "r1", "--store", store)
    assert (human.exit_code, human.stdout) == (0, "run r1: cancelled\n")
    assert ledger(shop) == []


def test_cancel_by_names_who_cancelled_in_the_marker_and_the_closed_approval(
    cli: Any, shop: Path, store: str
) -> None:
    import savegame

    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli("cancel", "r1", "--by", "ops-oncall", "--store", store)
    assert (out.exit_code, out.stdout) == (0, "run r1: cancelled\n")
    marker = savegame.client.history("r1", store=store)[0]
    assert marker.metadata["cancelled_by"] == "ops-oncall"
    (closed,) = savegame.client.list_effects("r1", store=store)
    assert (closed.error, closed.metadata["by"]) == ("run cancelled", "ops-oncall")


def test_compensate_undoes_the_completed_writes(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "small", order_id="B", amount=5)
    out = cli("compensate", "small", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "run small: compensated" in out.stdout
    assert f"savegame effects small --store {store}" in out.stdout
    assert ledger(shop) == ["refund B 5", "unrefund B 5"]
    journal = cli("effects", "small", "--store", store, "--json").json()
    assert [(e["kind"], e["name"], e["status"]) for e in journal] == [
        ("write", "refund", "done"),
        ("compensation", "unrefund", "done"),
    ]
    twice = cli("compensate", "small", "--store", store)
    assert (twice.exit_code, twice.stderr) == (
        4,
        "error: cannot compensate run small: it is compensated\n",
    )
    assert ledger(shop) == ["refund B 5", "unrefund B 5"]


def test_cancel_with_compensation(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    out = cli("cancel", "r1", "--compensate", "--wait", "5", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["status"] == "compensated"
    assert ledger(shop) == []  # the refund never ran, so there was nothing to undo


def test_a_cancelled_run_waits_for_nobody(cli: Any, shop: Path, store: str) -> None:
    start(cli, shop, store, "refunds", "r1", order_id="A", amount=500)
    assert cli("cancel", "r1", "--store", store).exit_code == 0
    assert cli("approvals", "--store", store, "--json").json() == []
    assert cli("approve", "r1", "--store", store).exit_code == 4

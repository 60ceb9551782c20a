"""What an adversarial review of fork and replay found, kept as attacks.

A fork reuses the origin's recorded calls; these are the ways that went wrong: a
write the origin left in doubt was called again, the fork's saga undid the
origin's write, an edit emptied savegame's own workspace manifest, and a fork's
reason was stored in plaintext under keys.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StorageConfig, Workflow, resolve, resume, run, tool
from savegame.client import fork, history, list_runs, plan_fork
from savegame.codec.crypto import Keyring, new_key
from savegame.errors import ConfigurationError, InDoubtEffectError, StepError

WORKLOAD = """
import os
from savegame import END, Workflow, tool

@tool(effect="write")
def review_charge(card, amount, *, request_id):
    with open(os.environ["LEDGER"], "a") as f:
        f.write(f"charge {card} {amount}\\n")
    if os.environ.get("DIE_IN_CHARGE"):
        os._exit(9)  # killed mid-call: the charge went out, no result was recorded
    return {"ok": True}

wf = Workflow("review-in-doubt")

@wf.step(entry=True)
def prep(state, ctx):
    return {"amount": state["amount"]}, "pay"

@wf.step
def pay(state, ctx):
    return {"receipt": ctx.call(review_charge, card="4242", amount=state["amount"])}, END
"""


def test_a_write_the_origin_left_in_doubt_is_not_called_again_by_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "review_in_doubt_flow.py").write_text(textwrap.dedent(WORKLOAD))
    ledger, store = tmp_path / "ledger.txt", f"sqlite:///{tmp_path / 's.db'}"
    child = f"from savegame import run\nfrom review_in_doubt_flow import wf\nrun(wf, {{'amount': 100}}, store={store!r}, run_id='orig')"
    env = {**os.environ, "LEDGER": str(ledger), "DIE_IN_CHARGE": "1", "PYTHONPATH": str(tmp_path)}
    died = subprocess.run([sys.executable, "-c", child], env=env, cwd=tmp_path, check=False)
    assert died.returncode == 9 and ledger.read_text() == "charge 4242 100\n"

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LEDGER", str(ledger))
    from review_in_doubt_flow import wf  # type: ignore[import-not-found]

    first = history("orig", store=store)[-1].checkpoint_id
    plan = plan_fork(first, store=store)
    assert [c.name for c in plan.in_doubt] == ["review_charge"] and plan.writes == ()
    with pytest.raises(InDoubtEffectError, match="orig:2:0"):
        fork(first, store=store, workflow=wf)
    [forked] = [r for r in list_runs(store=store) if r.run_id != "orig"]
    assert forked.status is RunStatus.NEEDS_ATTENTION
    assert ledger.read_text() == "charge 4242 100\n"  # charged once, by the origin
    # A person settles the origin's entry; the fork then reuses what they recorded.
    resolve("orig", "orig:2:0", done=True, result={"ok": True}, store=store)
    done = resume(forked.run_id, store=store, workflow=wf)
    assert done.status is RunStatus.COMPLETED and done.state["receipt"] == {"ok": True}
    assert ledger.read_text() == "charge 4242 100\n"  # charged once, by the origin


def test_a_forks_saga_never_undoes_the_write_it_reused_from_the_origin(tmp_path: Path) -> None:
    ledger: list[str] = []

    @tool(effect="write", name="review_refund")
    def review_refund(card: str, amount: int, *, result: Any, request_id: str) -> dict[str, int]:
        ledger.append(f"refund {card} {amount}")
        return {"ok": 1}

    @tool(effect="write", compensate="review_refund", name="review_charge_once")
    def charge(card: str, amount: int, *, request_id: str) -> dict[str, str]:
        ledger.append(f"charge {card} {amount}")
        return {"charge_id": "ch_" + request_id}

    wf = Workflow("review-saga", compensate_on_failure=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, "pay"

    @wf.step
    def pay(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {"c": ctx.call(charge, card="4242", amount=30)}, "send"

    @wf.step
    def send(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        if state["addr"] == "bad":
            raise ValueError("no such address")
        return {"sent": True}, END

    store = f"sqlite:///{tmp_path / 's.db'}"
    assert run(wf, {"addr": "ok"}, store=store, run_id="r9").status is RunStatus.COMPLETED
    first = history("r9", store=store)[-1].checkpoint_id
    with pytest.raises(StepError, match="no such address"):
        fork(first, store=store, workflow=wf, set={"addr": "bad"})
    assert ledger == ["charge 4242 30"]  # reused, and never refunded on the origin's behalf


def test_a_fork_cannot_edit_savegames_own_keys(tmp_path: Path) -> None:
    wf = Workflow("review-edit")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {"n": 1}, END

    store = f"sqlite:///{tmp_path / 's.db'}"
    done = run(wf, {}, store=store)
    first = history(done.run_id, store=store)[-1].checkpoint_id
    for edit in ({"update": {"$sg:workspace": {}}}, {"set": {"$sg:enc:k1:AAAA": 1}}):
        with pytest.raises(ConfigurationError, match=r"\$sg:"):
            fork(first, store=store, workflow=wf, **edit)  # type: ignore[arg-type]


def test_a_forks_reason_is_sealed_under_keys(tmp_path: Path) -> None:
    storage = StorageConfig(keyring=Keyring.parse(f"k1:{new_key()}"))
    wf = Workflow("review-reason")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {"n": state.get("n", 0) + 1}, END

    db = tmp_path / "s.db"
    done = run(wf, {}, store=f"sqlite:///{db}", storage=storage)
    first = history(done.run_id, store=f"sqlite:///{db}", storage=storage)[-1]
    fork(first.checkpoint_id, store=f"sqlite:///{db}", storage=storage, workflow=wf,
         reason="REASON-IN-PLAINTEXT-typo")  # fmt: skip
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("s.db"))
    assert b"REASON-IN-PLAINTEXT" not in stored


def test_a_fork_that_skips_a_steps_calls_does_not_reuse_the_next_steps(tmp_path: Path) -> None:
    """The origin's step 2 read what its step 1 wrote; a fork whose step 1 no longer
    writes has diverged, even though it made no call that differs."""
    ledger: list[str] = []

    @tool(effect="write", name="review_book")
    def book(seat: str, *, request_id: str) -> str:
        ledger.append(f"book {seat}")
        return f"booked {seat}"

    @tool(effect="read", name="review_seats_left")
    def seats_left() -> int:
        ledger.append("count")
        return 9 - sum(line.startswith("book") for line in ledger)

    wf = Workflow("review-skip")

    @wf.step(entry=True)
    def reserve(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        if state.get("book", True):
            ctx.call(book, seat="12A")
        return {}, "count"

    @wf.step
    def count(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {"left": ctx.call(seats_left)}, END

    store = f"sqlite:///{tmp_path / 's.db'}"
    assert run(wf, {}, store=store).state["left"] == 8
    origin = list_runs(store=store)[0].run_id
    first = history(origin, store=store)[-1].checkpoint_id
    forked = fork(first, store=store, workflow=wf, set={"book": False})
    assert ledger == ["book 12A", "count", "count"]  # counted again, not reused
    assert forked.result.state["left"] == 8

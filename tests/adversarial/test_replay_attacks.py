"""Attacks on ``savegame replay`` (issue 33 point 1): code paths that might make a call a
strict replay should answer from the journal (a retry policy, a read that raised, a saga's
compensations, a timer, a child run, a gather), and export files crafted to make a replay
import the module their run names. Every tool counts itself in an outside ledger (a
file), so a call nobody journaled is still seen."""

from __future__ import annotations

import os
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, Backoff, RunStatus, StepContext, Workflow, tool
from savegame.errors import ApprovalRejected
from savegame.inspect import replay_file
from savegame.runtime import load

TINY = Backoff(initial=0.001, maximum=0.001, jitter=0)
flaky: Counter[str] = Counter()


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("ATTACK_LEDGER", str(path))
    flaky.clear()
    return path


def _count(name: str) -> None:
    with Path(os.environ["ATTACK_LEDGER"]).open("a") as out:
        out.write(name + "\n")


def calls(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


@tool(retries=3, backoff=TINY, name="atk_flaky")
def atk_flaky(order: str) -> str:
    _count("atk_flaky")
    flaky[order] += 1
    if flaky[order] < 3:
        raise ConnectionError(f"attempt {flaky[order]} dropped")
    return f"found {order}"


@tool(name="atk_broken")
def atk_broken(order: str) -> str:
    _count("atk_broken")
    raise LookupError(f"no order {order}")


@tool(effect="write", idempotent=True, compensate="atk_unbook", name="atk_book")
def atk_book(seat: str, *, request_id: str) -> str:
    _count("atk_book")
    return f"booked {seat}"


@tool(effect="write", idempotent=True, name="atk_unbook")
def atk_unbook(seat: str, *, result: str, request_id: str) -> str:
    _count("atk_unbook")
    return f"released {seat}"


@tool(name="atk_read")
def atk_read(item: str) -> int:
    _count("atk_read")
    return len(item)


def _retrying() -> Workflow:
    wf = Workflow("atk-retry")

    @wf.step(entry=True)
    def look(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        found = ctx.call(atk_flaky, "A-1")
        try:
            ctx.call(atk_broken, "A-2")
            missing = False
        except LookupError:
            missing = True
        return {"found": found, "missing": missing}, END

    return wf


def _saga() -> Workflow:
    wf = Workflow("atk-saga", compensate_on_failure=True)

    @wf.step(entry=True)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"booked": ctx.call(atk_book, "12A")}, "pay"

    @wf.step()
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        raise RuntimeError("card declined")

    return wf


def _sleeper() -> Workflow:
    wf = Workflow("atk-sleep")

    @wf.step(entry=True)
    def nap(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.sleep(0)
        return {"n": ctx.call(atk_read, "kettle")}, END

    return wf


def test_a_retried_call_and_a_call_that_raised_are_never_made_again(
    tmp_path: Path, ledger: Path
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'r.db'}") as sg:
        done = sg.run(_retrying(), {})
        assert done.state == {"found": "found A-1", "missing": True}
        sg.export(done.run_id, tmp_path / "r.sgrun")
    assert calls(ledger) == ["atk_flaky"] * 3 + ["atk_broken"]
    report = replay_file(tmp_path / "r.sgrun", against=_retrying())
    # The read that raised left no result to answer it with: the replay stops there
    # (a divergence), never calls it again, nor the retried one.
    assert calls(ledger) == ["atk_flaky"] * 3 + ["atk_broken"], report.text()


def test_a_compensated_saga_replays_without_undoing_anything(tmp_path: Path, ledger: Path) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 's.db'}") as sg:
        with pytest.raises(savegame.errors.StepError):
            sg.run(_saga(), {}, run_id="saga-1")
        assert sg.store.get_run("saga-1").status is RunStatus.COMPENSATED
        sg.export("saga-1", tmp_path / "s.sgrun")
    assert calls(ledger) == ["atk_book", "atk_unbook"]
    report = replay_file(tmp_path / "s.sgrun", against=_saga())
    assert report.identical, report.text()
    assert calls(ledger) == ["atk_book", "atk_unbook"]


def test_a_timer_replays_without_waiting_or_calling(tmp_path: Path, ledger: Path) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 't.db'}") as sg:
        done = sg.run(_sleeper(), {})
        assert done.state == {"n": 6}
        sg.export(done.run_id, tmp_path / "t.sgrun")
    report = replay_file(tmp_path / "t.sgrun", against=_sleeper())
    assert report.identical, report.text()
    assert calls(ledger) == ["atk_read"]


EVIL = """
import os
from pathlib import Path
from typing import Any
from savegame import END, StepContext, Workflow, tool

with Path(os.environ["ATTACK_LEDGER"]).open("a") as out:
    out.write("imported evil\\n")


@tool(name="evil_read")
def evil_read(x: str) -> str:
    return x


WF = Workflow("atk-evil")


@WF.step(entry=True)
def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"x": ctx.call(evil_read, "x")}, END
"""


def _innocent() -> Workflow:
    @tool(name="evil_read")
    def evil_read(x: str) -> str:
        _count("evil_read")
        return x

    wf = Workflow("atk-evil")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"x": ctx.call(evil_read, "x")}, END

    return wf


def test_the_module_a_files_run_names_is_never_imported(tmp_path: Path, ledger: Path) -> None:
    module = tmp_path / "evil_flow.py"
    module.write_text(EVIL)
    with savegame.connect(f"sqlite:///{tmp_path / 'e.db'}") as sg:
        done = sg.run(load(f"{module}:WF"), {})
        assert done.status is RunStatus.COMPLETED
        assert sg.store.get_run(done.run_id).workflow_ref is not None
        sg.export(done.run_id, tmp_path / "e.sgrun")
    assert calls(ledger) == ["imported evil"]
    for name in [n for n in sys.modules if "evil_flow" in n]:
        del sys.modules[name]
    report = replay_file(tmp_path / "e.sgrun", against=_innocent())
    assert report.identical, report.text()
    assert calls(ledger) == ["imported evil"]  # not imported again, no tool called


def test_a_child_run_is_neither_started_nor_run_by_a_replay(tmp_path: Path, ledger: Path) -> None:
    from tests.adversarial.replay_child_flow import parent

    with savegame.connect(f"sqlite:///{tmp_path / 'c.db'}") as sg:
        done = sg.run(parent("kettle"), {}, wait=True)
        assert done.status is RunStatus.COMPLETED and done.state["child"]["weight"] == 6
        sg.export(done.run_id, tmp_path / "c.sgrun")
    assert calls(ledger) == ["child_weigh kettle"]
    assert replay_file(tmp_path / "c.sgrun", against=parent("kettle")).identical
    changed = replay_file(tmp_path / "c.sgrun", against=parent("teapot"))
    d = changed.runs[0].divergence
    assert d is not None and d.asked is not None and d.asked.kind == "child", changed.text()
    assert (d.step, d.position) == (1, "1:0") and "another input" in d.reason, changed.text()
    assert changed.runs[0].reused == 0
    assert calls(ledger) == ["child_weigh kettle"]


def _swallowing(item: str) -> Workflow:
    wf = Workflow("atk-swallow")

    @wf.step(entry=True)
    def look(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:  # sloppy code: a bare except around a call whose result is only logged
            print(ctx.call(atk_read, item))
        except BaseException:
            print("lookup failed")
        return {"done": True}, END

    return wf


def test_a_divergence_the_step_swallows_is_still_reported(tmp_path: Path, ledger: Path) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'w.db'}") as sg:
        done = sg.run(_swallowing("kettle"), {})
        sg.export(done.run_id, tmp_path / "w.sgrun")
    assert replay_file(tmp_path / "w.sgrun", against=_swallowing("kettle")).identical
    changed = replay_file(tmp_path / "w.sgrun", against=_swallowing("teapot"))
    assert not changed.identical, changed.text()
    d = changed.runs[0].divergence
    assert d is not None and d.position == "1:0", changed.text()
    assert calls(ledger) == ["atk_read"]


@tool(
    effect="write", idempotent=True, approval=True, name="atk_refund",
    expires=timedelta(microseconds=1), on_expiry="reject",
)  # fmt: skip
def atk_refund(amount: int, *, request_id: str) -> str:
    _count(f"atk_refund {amount}")
    return f"refunded {amount}"


def _expiring() -> Workflow:
    wf = Workflow("atk-expiry")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            return {"refund": ctx.call(atk_refund, 120)}, END
        except ApprovalRejected as no:
            return {"refund": None, "why": no.reason}, END

    return wf


def test_an_approval_that_expired_replays_its_rejection_calling_nothing(
    tmp_path: Path, ledger: Path
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'x.db'}") as sg:
        waiting = sg.run(_expiring(), {})
        done = sg.resume(waiting.run_id, workflow=_expiring())
        assert done.status is RunStatus.COMPLETED and done.state["refund"] is None, done
        sg.export(done.run_id, tmp_path / "x.sgrun")
    report = replay_file(tmp_path / "x.sgrun", against=_expiring())
    assert report.identical, report.text()
    assert calls(ledger) == []


def _fan(first: str, extra: bool) -> Workflow:
    wf = Workflow("atk-fan")

    @wf.step(entry=True)
    async def fan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        async def one(branch: StepContext, item: str) -> int:
            total = await branch.acall(atk_read, item) + await branch.acall(atk_read, item * 2)
            if extra and item != first:  # a call the recording never made, in a branch
                total += await branch.acall(atk_read, item * 3)  # that otherwise matches
            return int(total)

        return {"totals": await ctx.map(one, [first, "toaster"])}, END

    return wf


def test_no_branch_of_a_gather_calls_anything_whichever_diverges(
    tmp_path: Path, ledger: Path
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'f.db'}") as sg:
        done = sg.run(_fan("kettle", extra=False), {})
        sg.export(done.run_id, tmp_path / "f.sgrun")
    made = calls(ledger)
    assert len(made) == 4
    for first, extra in [("teapot", False), ("kettle", True), ("teapot", True)]:
        report = replay_file(tmp_path / "f.sgrun", against=_fan(first, extra))
        assert not report.identical, (first, extra)
        assert calls(ledger) == made, (first, extra, report.text())


def _saga_paying(fails: bool) -> Workflow:
    wf = Workflow("atk-saga-2", compensate_on_failure=True)

    @wf.step(entry=True)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"booked": ctx.call(atk_book, "12A")}, "pay"

    @wf.step()
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if fails:
            raise RuntimeError("the new code's check refuses the card")
        return {"paid": True}, END

    return wf


def test_new_code_that_fails_a_saga_undoes_nothing_in_a_replay(
    tmp_path: Path, ledger: Path
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 's2.db'}") as sg:
        done = sg.run(_saga_paying(False), {})
        assert done.status is RunStatus.COMPLETED
        sg.export(done.run_id, tmp_path / "s2.sgrun")
    assert calls(ledger) == ["atk_book"]
    report = replay_file(tmp_path / "s2.sgrun", against=_saga_paying(True))
    assert not report.identical, report.text()
    assert calls(ledger) == ["atk_book"], report.text()  # the booking is not released

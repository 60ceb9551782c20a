"""Invariant 11, going back is safe: a fork's calls replay against its origin's journal,
approvals included, and only for the call a person approved."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, StorageConfig, Store, Workflow, approve, run, tool
from savegame.client import fork, history, list_effects, pending_interrupts
from savegame.codec.crypto import Keyring
from savegame.effects import REPLAY_KEY, REUSED, Origin, Replay
from savegame.effects._replay import position_of, scopes
from savegame.model import EffectKind, EffectRecord, EffectStatus

paid: list[tuple[int, str]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    paid.clear()


@tool(effect="write", approval=True, idempotent=True)
def replay_pay(amount: int, *, request_id: str) -> dict[str, Any]:
    paid.append((amount, request_id))
    return {"paid": amount}


wf = Workflow("replay-approvals")


@wf.step(entry=True)
def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    out = ctx.call(replay_pay, amount=state["amount"])
    return {"paid": out["paid"]}, "done"


@wf.step
def done(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"done": True}, END


def _approved_run(store: Store, storage: StorageConfig | None = None, **edit: Any) -> str:
    res = run(wf, {"amount": 30}, store=store, storage=storage)
    assert res.status is RunStatus.INTERRUPTED
    decision = approve(res.run_id, store=store, workflow=wf, storage=storage, **edit)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    return res.run_id


def _input(store: Store, run_id: str) -> str:
    return history(run_id, store=store)[-1].checkpoint_id


def test_a_reused_approved_write_needs_no_new_approval(store: Store) -> None:
    run_id = _approved_run(store)
    assert len(paid) == 1
    forked = fork(_input(store, run_id), store=store, workflow=wf)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert len(paid) == 1
    kinds = {e.kind: e.metadata[REPLAY_KEY] for e in list_effects(forked.run_id, store=store)}
    assert kinds == {EffectKind.APPROVAL: REUSED, EffectKind.WRITE: REUSED}


def test_an_approval_edited_by_a_person_is_reused_with_its_edit(store: Store) -> None:
    run_id = _approved_run(store, edit={"amount": 25})
    assert [amount for amount, _ in paid] == [25]
    forked = fork(_input(store, run_id), store=store, workflow=wf)
    assert forked.result is not None and forked.result.state["paid"] == 25
    assert len(paid) == 1


def test_other_arguments_ask_for_approval_again(store: Store) -> None:
    run_id = _approved_run(store)
    forked = fork(_input(store, run_id), set={"amount": 31}, store=store, workflow=wf)
    assert forked.result is not None and forked.result.status is RunStatus.INTERRUPTED
    waiting = pending_interrupts(forked.run_id, store=store)
    assert [(p.kind, p.payload) for p in waiting] == [(EffectKind.APPROVAL, {"amount": 31})]
    assert len(paid) == 1


def test_replay_under_encryption_reseals_for_the_fork(store: Store) -> None:
    storage = StorageConfig(keyring=Keyring({"k": os.urandom(32)}, active="k"))
    run_id = _approved_run(store, storage)
    forked = fork(_input(store, run_id), store=store, workflow=wf, storage=storage)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert len(paid) == 1
    stored = store.list_effects(forked.run_id)
    assert stored and all(b'"paid"' not in (e.result or b"") for e in stored)


def _entry(request_id: str, step: int, status: EffectStatus = EffectStatus.DONE) -> EffectRecord:
    return EffectRecord(
        run_id="origin", request_id=request_id, kind=EffectKind.WRITE, name="t", step=step,
        node="s", call_index=int(request_id.split(":")[2]), status=status, arguments=b"{}",
    )  # fmt: skip


def test_only_settled_calls_after_the_fork_point_are_offered() -> None:
    origin = Origin("origin", "cp", 2, "replay")
    replay = Replay.of(
        origin,
        [
            _entry("origin:2:0", 2),
            _entry("origin:3:0", 3),
            _entry("origin:3:1", 3, EffectStatus.PENDING),
            _entry("origin:3:2:attempt:1", 3),
        ],
        [],
    )
    assert replay.recorded("2:0", "s") is None
    assert replay.recorded("3:0", "s") is not None
    assert replay.recorded("3:0", "other step") is None
    assert replay.recorded("3:1", "s") is None
    replay.executed({})
    assert replay.recorded("3:0", "s") is None  # diverged: never used again


def test_an_executed_entry_of_the_fork_means_it_has_diverged() -> None:
    origin = Origin("origin", "cp", 0, "replay")
    own = replace(_entry("origin:1:0", 1), run_id="fork", metadata={REPLAY_KEY: "executed"})
    assert Replay.of(origin, [_entry("origin:1:0", 1)], [own]).diverged
    assert not Replay.of(origin, [_entry("origin:1:0", 1)], []).diverged
    assert Replay.of(Origin("origin", "cp", 0, "redo"), [], []).diverged


@pytest.mark.parametrize(
    ("request_id", "position", "inside"),
    [
        ("origin:3:0", "3:0", []),
        ("origin:3:0:approval", "3:0:approval", []),
        ("origin:3:0:b2:1", "3:0:b2:1", ["3:0:b2"]),
        ("origin:3:0:b2:1:approval", "3:0:b2:1:approval", ["3:0:b2"]),
        ("origin:3:0:b2:1:b0:4", "3:0:b2:1:b0:4", ["3:0:b2", "3:0:b2:1:b0"]),
        ("origin:3:2:attempt:1", None, []),  # a retry's attempt
        ("origin:3:0:b:1", None, []),
        ("origin:3:0:b2", None, []),  # a branch is no call
        ("origin:x:0", None, []),
        ("other:3:0", None, []),
        ("origin:3:0\n", None, []),
    ],
)
def test_a_calls_position_and_the_branches_it_lies_in(
    request_id: str, position: str | None, inside: list[str]
) -> None:
    assert position_of(request_id, "origin") == position
    assert scopes(position or "") == inside

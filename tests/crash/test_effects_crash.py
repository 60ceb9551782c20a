"""Invariant 4 under real SIGKILL: side effects happen exactly once across process deaths.

Children run the effects workload against a real SQLite store; the tools write
their real executions to a separate SQLite file (the outside world). Children
are killed at exact points (after a write ran but before its result was
journaled; after the result but before the checkpoint; inside compensation;
around the approval pause) and at 100+ random moments. A driver plays the
people: it approves the charge, settles in-doubt audit entries by looking at
the audit log, and compensates a failed run. At the end: one charge per
request id, one email, at most one audit entry (the one a person vouched for),
refunds exactly once, and the final state equal to an uninterrupted run's.
"""

from __future__ import annotations

import os
import random
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from savegame import RunStatus, approve, codec, resolve
from savegame.client import get_checkpoint, get_run, list_effects, pending_interrupts
from savegame.errors import NotFoundError

from .harness import Outcome, kill_after_delay, kill_at_hook, run_to_end

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects_child.py")


def world_rows(world: str, tool: str) -> list[tuple[str, int]]:
    if not os.path.exists(world):
        return []
    conn = sqlite3.connect(world)
    try:
        return conn.execute(
            "SELECT request_id, applied FROM executions WHERE tool = ? ORDER BY at", (tool,)
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def act_as_people(url: str, world: str, run_id: str, *, saga: bool) -> str | None:
    """Look at the run and do what a person would; return the next child mode or None when done."""
    try:
        info = get_run(run_id, store=url)
    except NotFoundError:
        return "start"
    status = info.status
    if status in (RunStatus.COMPLETED, RunStatus.COMPENSATED):
        return None
    if status is RunStatus.INTERRUPTED:
        # Approved already when a resumed process died before its next checkpoint.
        if pending_interrupts(run_id, store=url):
            approve(run_id, by="tester", store=url, resume=False)
        return "resume"
    if status is RunStatus.NEEDS_ATTENTION:
        for effect in list_effects(run_id, store=url):
            if effect.status.value == "pending" and effect.kind.value in ("write", "compensation"):
                # A person checks the audit log for this request id.
                happened = any(rid == effect.request_id for rid, _ in world_rows(world, "audit"))
                result = f"audited {effect.arguments['entry']}" if happened else None
                resolve(run_id, effect.request_id, done=happened, result=result, store=url)
        return "compensate" if _compensating(url, run_id) else "resume"
    if status in (RunStatus.COMPENSATING, RunStatus.COMPENSATION_FAILED):
        return "compensate"
    if status is RunStatus.FAILED:
        # The saga flow fails on purpose in its last step: a person compensates it.
        return "compensate" if saga else "resume"
    return "resume"  # running with a dead owner


def _compensating(url: str, run_id: str) -> bool:
    return any(e.kind.value == "compensation" for e in list_effects(run_id, store=url))


def drive(
    tmp: Path,
    name: str,
    *,
    saga: bool = False,
    hook: str | None = None,
    rng: random.Random | None = None,
    window: tuple[float, float] = (0.0, 0.3),
) -> tuple[str, str, list[Outcome]]:
    url = f"sqlite:///{tmp / f'{name}.db'}"
    world = str(tmp / f"{name}-world.db")
    env = {"SAVEGAME_WORLD": world, **({"SAVEGAME_FAIL_FINISH": "1"} if saga else {})}
    outcomes: list[Outcome] = []
    mode: str | None = "start"
    hooked = hook is None
    for attempt in range(40):
        if mode is None:
            break
        if not hooked and hook is not None:
            out = kill_at_hook(mode, url, "run", hook, script=CHILD, env=env)
            hooked = bool(out.hooks)
        elif rng is not None and attempt < 8 and rng.random() < 0.85:
            # Killing stops after a few attempts so every scenario finishes.
            out = kill_after_delay(mode, url, "run", rng.uniform(*window), script=CHILD, env=env)
        else:
            out = run_to_end(mode, url, "run", script=CHILD, env=env)
        outcomes.append(out)
        mode = act_as_people(url, world, "run", saga=saga)
    assert mode is None, (
        f"run did not finish: {[(o.done, o.error, o.stderr[-300:]) for o in outcomes]}"
    )
    if hook is not None:
        assert hooked, f"the hook {hook} was never reached"
    return url, world, outcomes


def check_world(world: str, *, saga: bool) -> None:
    charges = world_rows(world, "charge")
    assert charges, "the charge never ran"
    assert len({rid for rid, _ in charges}) == 1
    assert sum(applied for _, applied in charges) == 1  # retries were deduplicated by request id
    emails = world_rows(world, "email")
    assert len(emails) == 1  # reconcile found a sent email instead of sending it again
    audits = world_rows(world, "audit")
    # Neither idempotent nor reconcilable: never retried blindly. When a kill left it in
    # doubt, the person looked at the audit log, so it still ran exactly once.
    assert len(audits) == 1
    refunds = world_rows(world, "refund")
    if saga:
        assert sum(applied for _, applied in refunds) == 1
    else:
        assert refunds == []


def final_state(url: str) -> bytes:
    return codec.canonical(get_checkpoint("run", store=url).state)


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[bytes, RunStatus]]:
    tmp = tmp_path_factory.mktemp("effects-ref")
    refs = {}
    for saga in (False, True):
        url, world, outs = drive(tmp, f"ref-{saga}", saga=saga)
        assert all(o.returncode == 0 for o in outs)
        check_world(world, saga=saga)
        refs[saga] = (final_state(url), get_run("run", store=url).status)
    assert refs[False][1] is RunStatus.COMPLETED and refs[True][1] is RunStatus.COMPENSATED
    return refs


def check(
    url: str, world: str, saga: bool, references: dict[bool, tuple[bytes, RunStatus]]
) -> None:
    check_world(world, saga=saga)
    expected_state, expected_status = references[saga]
    assert get_run("run", store=url).status is expected_status
    assert final_state(url) == expected_state


@pytest.mark.parametrize(
    ("hook", "saga"),
    [
        ("charge:after_call", False),  # (a) the charge ran, its result was not journaled
        ("charge:after_result", False),  # (b) journaled, the step's checkpoint not written
        ("refund:after_call", True),  # (c) during compensation
        ("audit:after_call", False),  # a plain write in doubt: needs_attention, a person settles it
    ],
)
def test_kill_at_exact_points(
    tmp_path: Path, hook: str, saga: bool, references: dict[bool, tuple[bytes, RunStatus]]
) -> None:
    url, world, outcomes = drive(tmp_path, "exact", saga=saga, hook=hook)
    assert any(o.returncode == -9 for o in outcomes)
    check(url, world, saga, references)
    if hook == "audit:after_call":
        assert any(o.error == "InDoubtEffectError" for o in outcomes)
        [audit] = [e for e in list_effects("run", store=url) if e.name == "append_audit"]
        assert audit.metadata["resolved"] == "done"


def test_kill_while_interrupted_then_approve(
    tmp_path: Path, references: dict[bool, tuple[bytes, RunStatus]]
) -> None:
    # (d) The first process pauses for approval and exits; a resume after approval is
    # killed right after the charge ran; the approval survives and is not asked again.
    url, world, outcomes = drive(tmp_path, "paused", hook="charge:after_call")
    assert outcomes[0].done == "interrupted"
    approvals = [e for e in list_effects("run", store=url) if e.kind.value == "approval"]
    assert len(approvals) == 1 and approvals[0].metadata["by"] == "tester"
    check(url, world, False, references)


def _random(tmp: Path, seed: int, references: dict[bool, tuple[bytes, RunStatus]]) -> int:
    rng = random.Random(seed)
    saga = seed % 3 == 0
    url, world, outcomes = drive(tmp, f"random-{seed}", saga=saga, rng=rng, window=(0.05, 0.13))
    check(url, world, saga, references)
    return sum(1 for o in outcomes if o.returncode == -9)


def _random_kills(tmp: Path, seeds: range, references: dict[bool, tuple[bytes, RunStatus]]) -> int:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return sum(pool.map(lambda seed: _random(tmp, seed, references), seeds))


def test_kill_at_random_moments(
    tmp_path: Path, references: dict[bool, tuple[bytes, RunStatus]]
) -> None:
    assert _random_kills(tmp_path, range(10), references) >= 12


@pytest.mark.soak
def test_kill_at_many_more_random_moments(
    tmp_path: Path, references: dict[bool, tuple[bytes, RunStatus]]
) -> None:
    """Seventy more seeds, in CI's soak step (``python -m pytest -m soak``)."""
    assert _random_kills(tmp_path, range(10, 80), references) >= 115


def test_world_is_read_from_the_outside(tmp_path: Path) -> None:
    # The checks above read the outside world, not the store: make sure it is really written.
    _, world, _ = drive(tmp_path, "plain")
    assert {tool for tool in ("charge", "email", "audit") if world_rows(world, tool)} == {
        "charge",
        "email",
        "audit",
    }

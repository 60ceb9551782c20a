"""SIGKILL in the middle of a durable ADK run, then a resume in another process: each
model request is sent once (counted at the provider) and each write happens once
(counted in the outside ledger the tool writes), and the run ends in the state of an
uninterrupted run, byte for byte.

The child runs the bank agent (``bank.py``) whose real Gemini client asks the provider
in this process. The model's first turn asks for a transfer (a write) and a balance (a
read). The child is killed in the balance, after the transfer's result was journaled;
in the transfer itself, after the ledger line and before its result was journaled (in
doubt: the tool's ``reconcile`` finds the line by request id); or right after a model
answer was journaled, before the step's checkpoint; on an SQLite file and on PostgreSQL.
An approval asked in one process
is decided in another and the run resumed in a third; and a soak loop kills at random
moments.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from werkzeug import Request, Response

from savegame import RunStatus, approve, codec
from savegame.client import get_checkpoint, get_run, list_effects, model_calls
from savegame.errors import SavegameError
from savegame.model import EffectKind, EffectStatus
from tests.crash.harness import Outcome, kill_at_hook, parse_line, run_to_end, spawn
from tests.provider import GEMINI, FakeProvider, gemini

from .bank import ledger_lines

pytestmark = [pytest.mark.slow, pytest.mark.crash]

ROOT = str(Path(__file__).resolve().parents[3])
SRC = os.path.join(ROOT, "src")
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
ROUND = [("transfer", {"customer": "c1", "amount": 20}), ("balance", {"customer": "c1"})]
ANSWER = "Sent 20; the balance is 100."


def env(
    fake: FakeProvider, ledger: Path, question: str = "Send 20, then the balance."
) -> dict[str, str]:
    return {
        "SAVEGAME_MODEL_URL": fake.root,
        "SAVEGAME_LEDGER": str(ledger),
        "SAVEGAME_INPUT": json.dumps({"question": question}),
    }


def savegame_resume(url: str, given: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **given, "PYTHONPATH": os.pathsep.join([SRC, ROOT])}
    return subprocess.run(
        [sys.executable, "-m", "savegame", "resume", "run", "--store", url],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def script(fake: FakeProvider) -> None:
    fake.script(GEMINI, gemini(None, ROUND), gemini(ANSWER))


def final_state(url: str) -> bytes:
    return codec.canonical(get_checkpoint("run", store=url).state)


def kill_after_ready(
    mode: str,
    url: str,
    delay: float | None,
    given: dict[str, str],
    *,
    asked: Callable[[], int] = lambda: 0,
    requests: int = 0,
) -> tuple[Outcome, float]:
    """Start a child and SIGKILL it ``delay`` seconds after it printed READY (None: let it
    end) and the server has ``asked() >= requests``; what it reported, and the seconds
    from READY to its last line."""
    proc = spawn(mode, url, "run", script=CHILD, env=given)
    out = Outcome()
    assert proc.stdout is not None
    for line in proc.stdout:
        parse_line(line, out)
        if line.startswith("READY"):
            break
    ready = last = time.perf_counter()
    if delay is not None:
        while asked() < requests and proc.poll() is None:
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    for line in proc.stdout:
        parse_line(line, out)
        last = time.perf_counter()
    _, out.stderr = proc.communicate(timeout=60)
    out.returncode = proc.returncode
    return out, last - ready


def uninterrupted(fake: FakeProvider, tmp_path: Path) -> tuple[bytes, float]:
    """The end state of an uninterrupted run in a child process, and the seconds its
    turn took (from READY: ADK's import done)."""
    url, ledger = f"sqlite:///{tmp_path / 'reference.db'}", tmp_path / "reference.jsonl"
    script(fake)
    done, turn = kill_after_ready("start", url, None, env(fake, ledger))
    assert done.done == "completed", (done.error, done.stderr[-2000:])
    assert len(fake.bodies(GEMINI)) == 2 and len(ledger_lines(ledger)) == 1
    fake.reset()
    return final_state(url), turn


@pytest.fixture
def reference(fake: FakeProvider, tmp_path: Path) -> bytes:
    return uninterrupted(fake, tmp_path)[0]


@pytest.mark.parametrize("hook", ["balance:mid", "transfer:after", "model:after"])
def test_a_kill_mid_turn_pays_no_model_twice_and_writes_once(
    fake: FakeProvider, url: str, tmp_path: Path, hook: str, reference: bytes
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    script(fake)
    given = env(fake, ledger)

    killed = kill_at_hook("start", url, "run", hook, script=CHILD, env=given)
    assert killed.hooks == [hook], killed.stderr[-2000:]
    assert killed.returncode == -9
    assert len(fake.bodies(GEMINI)) == 1
    assert len(ledger_lines(ledger)) == (0 if hook == "model:after" else 1)

    # Resumed as an operator would, with the CLI: the workflow is found by the reference
    # the run keeps (bank.py:flow), the model and the ledger by the same environment.
    resumed = savegame_resume(url, given)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert get_run("run", store=url).status is RunStatus.COMPLETED
    # The answer the journal holds was not asked again; the next one once, with both results.
    bodies = fake.bodies(GEMINI)
    assert len(bodies) == 2
    responses = bodies[1]["contents"][-1]["parts"]
    assert [p["functionResponse"]["response"] for p in responses] == [
        {"result": "sent 20"}, {"result": 100.0},
    ]  # fmt: skip
    # The transfer happened once, under the request id of its journal entry.
    [write] = [e for e in list_effects("run", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.DONE
    assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20}]
    assert write.metadata.get("reconciled") is (True if hook == "transfer:after" else None)
    assert [c.response.content for c in model_calls("run", store=url)] == [None, ANSWER]
    assert final_state(url) == reference


def test_an_approval_asked_in_one_process_is_decided_in_another_and_run_in_a_third(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    fake.script(
        GEMINI,
        gemini(None, [("block_card", {"customer": "c1"})]),
        gemini("Blocked."),
    )
    given = env(fake, ledger, "Block my card.")
    paused = run_to_end("start", url, "run", script=CHILD, env=given)
    assert paused.done == "interrupted", (paused.error, paused.stderr[-2000:])
    assert ledger_lines(ledger) == []

    decision = approve("run", store=url, by="ada", resume=False)  # this process: no agent
    assert decision.error is None
    assert get_run("run", store=url).status is RunStatus.QUEUED  # for any process to continue

    finished = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert finished.done == "completed", (finished.error, finished.stderr[-2000:])
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]
    assert len(fake.bodies(GEMINI)) == 2


def _exists(url: str) -> bool:
    try:
        get_run("run", store=url)
    except SavegameError:  # no store yet, or no run in it
        return False
    return True


class ByTurn(FakeProvider):
    """The provider, answering a Gemini request by what it carries rather than from a
    queue: a request a killed child sent and never read the answer of must not take the
    answer its resumed run will ask for."""

    def _handle(self, request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        if request.path != GEMINI:
            return super()._handle(request)
        turns = sum(1 for c in body.get("contents", ()) if c.get("role") == "model")
        self.script(GEMINI, gemini(None, ROUND) if turns == 0 else gemini(ANSWER))
        return super()._handle(request)


@pytest.fixture
def by_turn() -> Iterator[FakeProvider]:
    server = ByTurn()
    server.server.start()
    try:
        yield server
    finally:
        server.server.clear()
        server.server.stop()


def _random_kills(
    fake: FakeProvider, tmp: Path, seeds: range, reference: bytes, whole: float
) -> tuple[int, int, int, int]:
    """Kill each seed's run at random moments until it completes: (kills, kills after the
    run had journaled a call, requests, writes). ``whole``: the seconds an uninterrupted
    child's turn took after it was READY; the kills land in it, and a little past it."""
    kills = late = requests = writes = 0
    for seed in seeds:
        rng = random.Random(seed)
        url, ledger = f"sqlite:///{tmp / f'runs-{seed}.db'}", tmp / f"ledger-{seed}.jsonl"
        fake.reset()
        given = env(fake, ledger)
        done, killed_here, last = None, 0, ""
        for _ in range(8):
            # A child killed before it created the run (still importing) left none to resume.
            mode = "resume" if _exists(url) else "start"
            # From READY, anywhere in the turn; or just after the server got the first or
            # the second model request: in the call, or in what follows its answer.
            after = rng.choice([0, 1, 2])
            delay = rng.uniform(0, 1.1 * whole) if after == 0 else rng.uniform(0, 0.04)
            before = len(fake.bodies(GEMINI))
            outcome, _ = kill_after_ready(
                mode,
                url,
                delay,
                given,
                asked=lambda before=before: len(fake.bodies(GEMINI)) - before,
                requests=after,
            )
            last = f"{outcome.error} {outcome.stderr[-1500:]}"
            if outcome.done is not None:
                done = outcome.done
                break
            killed_here += outcome.returncode == -9
            if _exists(url) and get_run("run", store=url).status is RunStatus.COMPLETED:
                done = "completed"  # killed between its last commit and saying DONE
                break
            late += (
                outcome.returncode == -9 and _exists(url) and bool(list_effects("run", store=url))
            )
        if done is None:
            mode = "resume" if _exists(url) else "start"
            finished = run_to_end(mode, url, "run", script=CHILD, env=given)
            done, last = finished.done, f"{finished.error} {finished.stderr[-1500:]}"
        assert done == "completed", (seed, last)
        asked = len(fake.bodies(GEMINI))
        # Each kill loses at most the one request in flight; the journal holds two.
        assert 2 <= asked <= 2 + killed_here, (seed, asked, killed_here)
        assert [c.response.content for c in model_calls("run", store=url)] == [None, ANSWER]
        assert len(ledger_lines(ledger)) == 1, seed
        assert final_state(url) == reference, seed
        kills, requests = kills + killed_here, requests + asked
        writes += len(ledger_lines(ledger))
    return kills, late, requests, writes


@pytest.mark.soak
@pytest.mark.timeout(3600)  # a few processes per run, ~10 s each on a shared machine
def test_kills_at_random_moments(fake: FakeProvider, by_turn: FakeProvider, tmp_path: Path) -> None:
    reference, whole = uninterrupted(fake, tmp_path)
    trials = int(os.environ.get("SAVEGAME_ADK_SOAK_TRIALS", "12"))
    kills, late, requests, writes = _random_kills(
        by_turn, tmp_path, range(trials), reference, whole
    )
    print(
        f"ADK soak: {trials} runs, {kills} kills ({late} after a call was journaled), "
        f"{requests} model requests, {writes} writes"
    )
    assert late >= trials // 3  # the kills reached the turn, not only the imports
    assert writes == trials

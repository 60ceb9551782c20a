"""SIGKILL in the middle of a durable Agents SDK run, then a resume in another process:
each model request is sent once (counted at the provider) and each write happens once
(counted in the outside ledger the tool writes), and the run ends in the state an
uninterrupted run ends in (its answer and the SDK's usage).

The child runs the bank agent (``bank.py``) whose real OpenAI model (Responses API or
Chat Completions) asks the provider in this process. The model's first turn asks for a
transfer (a write) and a balance (a read). The child is killed:

* ``model:after``: the first answer is journaled, no tool has run, the step has not
  checkpointed;
* ``balance:mid``: in the balance, after the transfer's result was journaled;
* ``transfer:after``: in the transfer itself, after the ledger line and before its
  result was journaled (in doubt: the tool's ``reconcile`` finds the line by request id).

A soak test kills the child at random moments, again and again, until the run ends.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, run
from savegame.client import get_checkpoint, get_run, list_effects, model_calls
from savegame.errors import NotFoundError, StoreNotFoundError
from savegame.model import EffectKind, EffectStatus
from tests.crash.harness import Outcome, kill_at_hook, parse_line, run_to_end, spawn
from tests.provider import FakeProvider, Reply, chat, responses
from tests.services import BACKENDS

from .bank import build, ledger_lines, path_of, script

pytestmark = [pytest.mark.slow, pytest.mark.crash]

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
SRC = str(Path(__file__).resolve().parents[3] / "src")
QUESTION = "Send 20 from c1, then tell me the balance."
ROUND = [("transfer", {"customer": "c1", "amount": 20}), ("balance", {"customer": "c1"})]
ANSWER = "Sent 20; the balance is 100."


def env(fake: FakeProvider, ledger: Path, api: str) -> dict[str, str]:
    return {
        "SAVEGAME_MODEL_URL": fake.openai_url,
        "SAVEGAME_LEDGER": str(ledger),
        "SAVEGAME_API": api,
        "SAVEGAME_INPUT": f'{{"question": "{QUESTION}"}}',
    }


def uninterrupted(fake: FakeProvider, tmp_path: Path, api: str) -> dict[str, Any]:
    """The state a run that nobody killed ends in (its own store, ledger and requests)."""
    flow, _ = build("oai-crash", fake.openai_url, tmp_path / "reference.jsonl", api)
    fake.reset()
    script(fake, api, (None, ROUND), (ANSWER, []))
    done = run(flow, {"question": QUESTION}, run_id="run", store="memory://")
    assert done.status is RunStatus.COMPLETED
    return dict(done.state)


@pytest.mark.parametrize(
    ("hook", "api", "backend"),
    [
        ("model:after", "responses", "sqlite"),
        ("balance:mid", "responses", "sqlite"),
        ("transfer:after", "responses", "sqlite"),
        ("model:after", "chat", "sqlite"),
        ("transfer:after", "chat", "sqlite"),
        ("transfer:after", "responses", "postgres"),
    ],
)
def test_a_kill_pays_no_model_twice_and_writes_once(
    fake: FakeProvider, tmp_path: Path, hook: str, api: str, backend: str
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    script(fake, api, (None, ROUND), (ANSWER, []))
    given = env(fake, ledger, api)
    with BACKENDS[backend](tmp_path) as url:
        killed = kill_at_hook("start", url, "run", hook, script=CHILD, env=given)
        assert killed.hooks == [hook], killed.stderr[-2000:]
        assert killed.returncode == -9
        assert len(fake.bodies(path_of(api))) == 1
        assert len(ledger_lines(ledger)) == (0 if hook == "model:after" else 1)

        resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
        assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
        # The turn the journal holds was not sent again; the next one once.
        assert len(fake.bodies(path_of(api))) == 2
        # The transfer happened once, under the request id of its journal entry.
        [write] = [e for e in list_effects("run", store=url) if e.kind is EffectKind.WRITE]
        assert write.status is EffectStatus.DONE
        assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20.0}]
        assert write.metadata.get("reconciled") is (True if hook == "transfer:after" else None)
        # The journal holds each model request once: the one made before the kill, one after.
        assert [c.response.content for c in model_calls("run", store=url)] == [None, ANSWER]
        state = get_checkpoint("run", store=url).state
    # The end state is an uninterrupted run's: the answer and the SDK's usage (2 requests).
    reference = uninterrupted(fake, tmp_path, api)
    assert reference["usage"]["requests"] == 2
    assert state == reference


def by_request(api: str, body: dict[str, Any]) -> Reply:
    """The first turn (tool calls, ids of their own) until the tools' results are in the
    request, then the answer."""
    if api == "chat":
        answered = body["messages"][-1]["role"] == "tool"
    else:
        answered = body["input"][-1].get("type") == "function_call_output"
    if answered:
        return (chat if api == "chat" else responses)(ANSWER)
    ids = [f"call_{uuid.uuid4().hex[:8]}_{n}" for n in range(len(ROUND))]
    return (chat if api == "chat" else responses)(None, ROUND, call_ids=ids)


def _status(url: str) -> RunStatus | None:
    """The run's status, or None when the kill came before the run was created."""
    try:
        return get_run("run", store=url).status
    except (NotFoundError, StoreNotFoundError):
        return None


def kill_after_request(
    mode: str, url: str, given: dict[str, str], asked: Callable[[], int], wait: float
) -> tuple[Outcome, float]:
    """Start a child, and SIGKILL it ``wait`` seconds after the server got its next
    request (or when it ended first): kills land in the run's tool rounds and between
    an answer and its journal entry, not in the child's imports. Also returns how long
    after that request the child said it was done (its exit may take longer)."""
    before = asked()
    proc = spawn(mode, url, "run", script=CHILD, env=given)
    lines: list[tuple[float, str]] = []
    errors: list[str] = []

    def read() -> None:
        lines.extend((time.monotonic(), line) for line in proc.stdout or ())

    readers = [
        threading.Thread(target=read, daemon=True),
        threading.Thread(target=lambda: errors.extend(proc.stderr or ()), daemon=True),
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 60
    while asked() == before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    seen = time.monotonic()
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    for reader in readers:
        reader.join(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    out, after = Outcome(), 0.0
    for at, line in lines:
        parse_line(line, out)
        if line.startswith("DONE"):
            after = at - seen
    out.returncode, out.stderr = proc.returncode, "".join(errors)
    return out, after


@pytest.mark.soak
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_random_kills_until_the_run_ends(fake: FakeProvider, tmp_path: Path, api: str) -> None:
    """Kill the child at random moments after its first request (up to three times a run),
    resume, and let the last execution finish: wherever a kill lands, each write happens
    once, the journal holds each model answer once, and the run ends as an uninterrupted
    one does. Requests: one per turn, plus at most one per kill (a kill between the
    server's answer and its journal entry: that answer was never recorded, so it is
    asked again)."""

    def asked() -> int:
        return len(fake.bodies(path_of(api)))

    script(fake, api, (None, ROUND), (ANSWER, []))
    timed, window = kill_after_request(
        "start", f"sqlite:///{tmp_path / 'timed.db'}", env(fake, tmp_path / "t.jsonl", api),
        asked, 60.0,
    )  # fmt: skip
    assert timed.done == "completed", timed.stderr[-2000:]
    reference = uninterrupted(fake, tmp_path, api)
    totals = {"runs": 0, "kills": 0, "requests": 0, "writes": 0}
    for seed in range(10):
        rng = random.Random(seed)
        base = tmp_path / f"seed{seed}"
        base.mkdir()
        ledger, url = base / "ledger.jsonl", f"sqlite:///{base / 'runs.db'}"
        fake.reset()
        # A model that answers by what it is asked: a kill may cost an answer or not.
        fake.respond(path_of(api), lambda body: by_request(api, body))
        given, mode, kills = env(fake, ledger, api), "start", 0
        for _ in range(3):
            out, _ = kill_after_request(mode, url, given, asked, rng.uniform(0, 1.2) * window)
            if out.done is not None:
                break
            assert out.error is None, (out.error, out.stderr[-2000:])
            kills += 1
            status = _status(url)
            if status is RunStatus.COMPLETED:  # killed after its last commit, before DONE
                break
            mode = "start" if status is None else "resume"
        else:
            out = run_to_end(mode, url, "run", script=CHILD, env=given)
            assert out.done == "completed", (out.error, out.stderr[-2000:])
        assert _status(url) is RunStatus.COMPLETED
        [write] = [e for e in list_effects("run", store=url) if e.kind is EffectKind.WRITE]
        assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20.0}]
        assert [c.response.content for c in model_calls("run", store=url)] == [None, ANSWER]
        assert get_checkpoint("run", store=url).state == reference
        sent = asked()
        assert 2 <= sent <= 2 + kills
        totals = {
            "runs": totals["runs"] + 1,
            "kills": totals["kills"] + kills,
            "requests": totals["requests"] + sent,
            "writes": totals["writes"] + len(ledger_lines(ledger)),
        }
    print(f"openai-agents soak ({api}): {totals}, window {window:.3f} s")  # shown with -s


def test_an_approval_outlives_the_process_that_asked_for_it(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """The SDK's ``needs_approval`` as a savegame approval, across three processes: one
    runs until the gated call and exits, ``savegame approve --no-resume`` decides from
    another, a third resumes; the model is asked each turn once, the card blocked once."""
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    script(fake, "responses", (None, [("block_card", {"customer": "c1"})]), ("Blocked.", []))
    given = {**env(fake, ledger, "responses"), "SAVEGAME_INPUT": '{"question": "block c1"}'}

    started = run_to_end("start", url, "run", script=CHILD, env=given)
    assert started.done == "interrupted", (started.error, started.stderr[-2000:])
    assert ledger_lines(ledger) == [] and len(fake.bodies(path_of("responses"))) == 1

    cli_env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    decided = subprocess.run(
        [sys.executable, "-m", "savegame", "approve", "run", "--no-resume", "--by", "ada",
         "--store", url],
        capture_output=True, text=True, env=cli_env, timeout=120, check=False,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr[-2000:]

    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    [write] = [e for e in list_effects("run", store=url) if e.kind is EffectKind.WRITE]
    assert ledger_lines(ledger) == [{"request_id": write.request_id, "blocked": "c1"}]
    assert len(fake.bodies(path_of("responses"))) == 2
    assert get_checkpoint("run", store=url).state["answer"] == "Blocked."

"""Real model calls (the openai SDK over HTTP to a local provider) are paid once across
a SIGKILL, a resume, a replayed fork; a stream a SIGKILL cut off is asked again, and
the journal says so.

A child process runs an agent whose model is ``savegame.models.OpenAI``; the provider
runs in the test's process and counts what it is asked. The child is SIGKILLed in the
middle of a tool round (after the first of two parallel tool calls) or right after a
model call was journaled and before its step's checkpoint; a second process resumes.
The provider is asked each turn once: a recorded call is never sent again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame import RunStatus
from savegame.client import fork, history, list_effects, model_calls
from savegame.effects import ABANDONED
from savegame.model import EffectStatus
from savegame.runtime import load
from tests import provider
from tests.provider import CHAT, FakeProvider, chat, chat_stream

from .harness import kill_at_hook, run_to_end

pytestmark = pytest.mark.crash

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "effects_child.py")


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    yield from provider.serve()


def env(fake: FakeProvider, workload: str, given: str) -> dict[str, str]:
    return {
        "SAVEGAME_WORKLOAD": f"model_workload.py:{workload}",
        "SAVEGAME_INPUT": given,
        "SAVEGAME_MODEL_URL": fake.openai_url,
    }


def test_a_kill_mid_tool_round_does_not_ask_the_model_again(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    calls = [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]
    fake.script(CHAT, chat(None, calls), chat("Both total 120."))
    given = env(fake, "agent", '{"input": "A-1 and A-2?"}')

    killed = kill_at_hook("start", url, "run", "tools:mid", script=CHILD, env=given)
    assert killed.hooks == ["tools:mid"], killed.stderr[-2000:]
    assert killed.returncode == -9
    assert len(fake.bodies(CHAT)) == 1

    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    # The turn the journal holds was not sent again; the next one was sent once, with
    # both tool results.
    bodies = fake.bodies(CHAT)
    assert len(bodies) == 2
    assert [m["role"] for m in bodies[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    assert [c.response.content if c.response else None for c in model_calls("run", store=url)] == [
        None,
        "Both total 120.",
    ]

    # A fork from the first tool round, replaying: every call comes from the journal.
    os.environ["SAVEGAME_MODEL_URL"] = fake.openai_url  # the workload reads it at import
    try:
        workflow = load(os.path.join(HERE, "model_workload.py:agent"))
    finally:
        del os.environ["SAVEGAME_MODEL_URL"]
    first_round = [cp for cp in history("run", store=url) if cp.node == "llm"][-1]
    forked = fork(first_round.checkpoint_id, store=url, workflow=workflow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == "Both total 120."
    assert len(fake.bodies(CHAT)) == 2


def test_a_kill_after_the_call_was_journaled_does_not_pay_it_again(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(CHAT, chat("42", usage=(120, 30, 0)))
    given = env(fake, "ask", '{"question": "what is 6 x 7?"}')

    killed = kill_at_hook("start", url, "run", "ask:after_llm", script=CHILD, env=given)
    assert killed.hooks == ["ask:after_llm"], killed.stderr[-2000:]
    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    assert len(fake.bodies(CHAT)) == 1
    [call] = model_calls("run", store=url)
    assert call.response is not None and call.response.input_tokens == 120
    assert call.request is not None and call.request.params["base_url"] == fake.openai_url


def test_a_kill_mid_stream_asks_again_and_the_journal_says_so(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(CHAT, chat_stream(["The answer ", "is 42."]), chat_stream(["It is ", "42."]))
    given = env(fake, "tell", '{"question": "what is 6 x 7?"}')

    killed = kill_at_hook("start", url, "run", "stream:mid", script=CHILD, env=given)
    assert killed.hooks == ["stream:mid"], killed.stderr[-2000:]
    assert killed.returncode == -9
    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    # Nothing was recorded of the stream the kill cut: the model was asked again, once.
    assert len(fake.bodies(CHAT)) == 2
    [call] = model_calls("run", store=url)
    assert call.response is not None and call.response.content == "It is 42."
    assert call.abandoned_streams == 1
    marks = [
        (e.status, e.error) for e in list_effects("run", store=url) if ":stream:" in e.request_id
    ]
    assert marks == [(EffectStatus.NOT_DONE, ABANDONED), (EffectStatus.DONE, None)]

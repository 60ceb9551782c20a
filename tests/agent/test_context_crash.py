"""A summary is paid once: a SIGKILL between the summary call and its step's checkpoint,
then a resume in a fresh process, then a replayed fork, ask the summariser once in all.

The child runs an agent with ``KeepLast(2, summarise=...)`` over the openai SDK; the
provider (tests/provider.py) runs in this process and counts what it is asked. The
agent's turn is streamed and the child is killed at its first chunk: the same step
already journaled the summary call, and no checkpoint followed it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus
from savegame.agent._context import SUMMARY_INSTRUCTIONS
from savegame.client import fork, history, model_calls
from savegame.runtime import load
from tests import provider
from tests.crash.harness import kill_at_hook, run_to_end
from tests.provider import CHAT, FakeProvider, chat, chat_stream

pytestmark = pytest.mark.crash

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "..", "crash", "effects_child.py")
WORKLOAD = os.path.join(HERE, "context_workload.py")

EARLIER: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
for n in range(4):
    EARLIER += [
        {"role": "user", "content": f"question {n}: my order number is A-{n}"},
        {"role": "assistant", "content": f"noted A-{n}"},
    ]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    yield from provider.serve()


def summary_requests(fake: FakeProvider) -> list[dict[str, Any]]:
    return [b for b in fake.bodies(CHAT) if b["messages"][0]["content"] == SUMMARY_INSTRUCTIONS]


def test_a_summary_is_journaled_once_across_a_kill_a_resume_and_a_fork(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(
        CHAT,
        chat("Orders A-0 and A-1 were noted."),
        chat_stream(["cut ", "off"]),
        chat_stream(["Noted ", "A-4."]),
    )
    given = {
        "SAVEGAME_WORKLOAD": f"{WORKLOAD}:agent",
        "SAVEGAME_INPUT": json.dumps({"messages": EARLIER, "input": "and A-4"}),
        "SAVEGAME_MODEL_URL": fake.openai_url,
    }

    killed = kill_at_hook("start", url, "run", "stream:mid", script=CHILD, env=given)
    assert killed.hooks == ["stream:mid"], killed.stderr[-2000:]
    assert killed.returncode == -9
    assert len(summary_requests(fake)) == 1 and len(fake.bodies(CHAT)) == 2

    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    # The resumed step got the summary from the journal; only the cut stream was asked again.
    assert len(summary_requests(fake)) == 1
    assert len(fake.bodies(CHAT)) == 3
    [summary] = summary_requests(fake)
    assert "question 0" in summary["messages"][1]["content"]
    assert "question 2" not in summary["messages"][1]["content"]  # still in the window
    sent = fake.bodies(CHAT)[-1]["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert sent[1]["content"].endswith("Orders A-0 and A-1 were noted.")
    assert not any("question 0" in str(m.get("content")) for m in sent)
    calls = model_calls("run", store=url)
    assert [c.response.content if c.response else None for c in calls] == [
        "Orders A-0 and A-1 were noted.",
        "Noted A-4.",
    ]

    # A fork from before the turn replays both calls from the journal: nothing is asked.
    os.environ["SAVEGAME_MODEL_URL"] = fake.openai_url  # the workload reads it at import
    try:
        workflow = load(f"{WORKLOAD}:agent")
    finally:
        del os.environ["SAVEGAME_MODEL_URL"]
    before = [cp for cp in history("run", store=url) if cp.node == "receive"][-1]
    forked = fork(before.checkpoint_id, store=url, workflow=workflow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == "Noted A-4."
    assert forked.result.state["context"]["summary"] == "Orders A-0 and A-1 were noted."
    assert len(forked.result.state["messages"]) == len(EARLIER) + 2
    assert len(fake.bodies(CHAT)) == 3

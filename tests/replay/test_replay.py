"""Recorded runs replayed against changed code: the README's support agent recorded once on
a real SQLite file (its model on the local provider), exported, then replayed as it is and
changed three ways (a prompt, a tool's arguments, a step), each divergence reported where
it is; nothing is called and nothing is written to the store the runs came from."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import savegame
from savegame import END, RunStatus, Workflow, tool
from savegame.cli import app
from savegame.codec import encode_value
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    ConfigurationError,
    DamagedExportError,
    EncryptionKeyError,
    NotFoundError,
)
from savegame.inspect import ChangeKind, ReplayReport, replay_file
from savegame.maintenance import _archive
from savegame.model import EffectKind, EffectRecord
from savegame.testing import assert_replays
from tests import provider
from tests.docs.pages import doc_example
from tests.provider import CHAT, chat
from tests.replay import support


@pytest.fixture(scope="module")
def fake() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture(scope="module")
def recorded(
    fake: provider.FakeProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, Path]]:
    """(run id, store file, export file): the agent asked for a refund, a person approving it."""
    folder = tmp_path_factory.mktemp("recorded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REPLAY_TOOL_LOG", str(folder / "tools.log"))
        patch.setenv("SUPPORT_LEDGER", str(folder / "refunds.jsonl"))
        fake.script(
            CHAT,
            chat(None, [("lookup_order", {"order_id": "A-1"})]),
            chat(None, [("issue_refund", {"order_id": "A-1", "amount": 120})]),
            chat("Refunded 120 for your kettle (A-1)."),
        )
        agent = support.support(fake.openai_url)
        db = folder / "runs.db"
        with savegame.connect(f"sqlite:///{db}") as sg:
            paused = sg.run(agent, {"input": support.ASK})
            assert paused.status is RunStatus.INTERRUPTED
            sg.export(paused.run_id, folder / "waiting.sgrun")
            done = sg.approve(paused.run_id, by="ana", workflow=agent)
            assert done.result is not None and done.result.status is RunStatus.COMPLETED
            sg.export(paused.run_id, folder / "refund.sgrun")
        assert support.tool_calls() == ["lookup_order", "issue_refund"]
        assert len(fake.bodies(CHAT)) == 3
        yield paused.run_id, db, folder / "refund.sgrun"


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: provider.FakeProvider) -> Path:
    """A fresh tool ledger, and a provider that answers nothing (a call would fail loudly)."""
    fake.reset()
    monkeypatch.setenv("REPLAY_TOOL_LOG", str(tmp_path / "tools.log"))
    monkeypatch.setenv("SUPPORT_LEDGER", str(tmp_path / "refunds.jsonl"))
    return tmp_path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_same_code_replays_identical_calling_nothing(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    run_id, _, export = recorded
    report = replay_file(export, against=support.support(fake.openai_url))
    assert report.identical, report.text()
    [run] = report.runs
    assert (run.run_id, run.workflow, run.recorded) == (run_id, "support", RunStatus.COMPLETED)
    # Three model calls, two tool calls: every one answered by the journal.
    assert (run.steps, run.reused) == (6, 5)
    assert fake.asked == []
    assert support.tool_calls() == []
    assert "1 of 1 run identical" in report.text()


def test_a_prompt_edit_diverges_at_the_first_model_call(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    edited = support.SYSTEM.replace("Be brief.", "Be brief and kind.")
    report = replay_file(recorded[2], against=support.support(fake.openai_url, system=edited))
    [run] = report.diverged
    d = run.divergence
    assert d is not None
    assert (d.step, d.node, d.call, d.position) == (2, "llm", 0, "2:0")
    assert d.asked is not None and d.recorded is not None
    assert (d.asked.kind, d.recorded.kind) == ("model", "model")
    assert d.asked.name == d.recorded.name == "llm:gpt-4o-mini"
    [change] = d.changes
    assert change.path == ("messages", 0, "content") and change.kind is ChangeKind.CHANGED
    assert (change.old, change.new) == (support.SYSTEM, edited)
    # The state differs from step 1 on: receive put the new prompt in the conversation.
    assert run.state is not None and run.state.step == 1
    assert [c.path for c in run.state.diff.changes] == [("messages", 0, "content")]
    text = report.text()
    assert "first divergence at step 2 (llm), call 0" in text
    assert "the journal holds another request to this model here" in text
    assert '+ "…ed orders, at most their total. Be brief and kind."' in text
    assert fake.asked == [] and support.tool_calls() == []


def test_a_tool_argument_change_diverges_at_that_call(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    agent = support.support(fake.openai_url, refund=support.refund_in_currency())
    report = replay_file(recorded[2], against=agent)
    [run] = report.diverged
    d = run.divergence
    assert d is not None
    assert (d.step, d.node, d.call) == (5, "tools", 0)
    assert d.asked is not None and d.recorded is not None
    assert d.recorded.arguments == {"order_id": "A-1", "amount": 120}
    assert d.asked.arguments == {"order_id": "A-1", "amount": 120, "currency": "EUR"}
    [change] = d.changes
    assert (change.path, change.kind, change.new) == (
        ("arguments", "currency"),
        ChangeKind.ADDED,
        "EUR",
    )
    # The calls before it (two model calls, the lookup) were the same: answered, and the
    # states up to the divergence are the recording's.
    assert run.reused == 3 and run.state is None
    assert not (counted / "refunds.jsonl").exists() and support.tool_calls() == []
    assert fake.asked == []


def test_an_added_step_diverges_where_the_steps_shift(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    report = replay_file(
        recorded[2], against=support.support(fake.openai_url, kind=support.Triaged)
    )
    [run] = report.diverged
    d = run.divergence
    assert d is not None
    # The model's first turn is step 3 now; the recording's step 3 looked the order up.
    assert (d.step, d.node, d.call) == (3, "llm", 0)
    assert d.asked is not None and d.asked.kind == "model"
    assert d.recorded is not None
    assert (d.recorded.kind, d.recorded.name, d.recorded.node) == ("tool", "lookup_order", "tools")
    assert d.recorded.arguments == {"order_id": "A-1"}
    state = run.state
    assert state is not None
    assert (state.step, state.recorded_node, state.replayed_node) == (2, "llm", "triage")
    kinds = {c.path: c.kind for c in state.diff.changes}
    assert kinds[("priority",)] is ChangeKind.ADDED
    assert kinds[("messages",)] is ChangeKind.SHRANK  # the model's turn is not there yet
    assert fake.asked == [] and support.tool_calls() == []


def test_the_store_a_run_came_from_is_only_read(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    run_id, db, _ = recorded
    before = _digest(db)
    with savegame.connect(f"sqlite:///{db}") as sg:
        runs = sg.runs()
        same = sg.replay(run_id, against=support.support(fake.openai_url))
        edited = support.support(fake.openai_url, system="Refund everything.")
        changed = sg.replay([run_id], against=edited)
        assert [r.run_id for r in sg.runs()] == [r.run_id for r in runs]
    assert same.identical and not changed.identical
    assert same.runs[0].source == f"sqlite:///{db}"
    assert _digest(db) == before
    assert fake.asked == [] and support.tool_calls() == []


def test_a_recording_waiting_for_approval_replays_to_where_it_waits(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    waiting = recorded[2].parent / "waiting.sgrun"
    report = replay_file(waiting, against=support.support(fake.openai_url))
    [run] = report.runs
    assert report.identical, report.text()
    assert run.recorded is RunStatus.INTERRUPTED
    assert run.note is not None and "where the recording stops" in run.note
    # Asking for another refund there is still a divergence.
    changed = replay_file(
        waiting, against=support.support(fake.openai_url, refund=support.refund_in_currency())
    )
    [diverged] = changed.diverged
    assert diverged.divergence is not None and diverged.divergence.step == 5
    assert diverged.divergence.recorded is not None
    assert diverged.divergence.recorded.kind == "approval"
    assert fake.asked == [] and support.tool_calls() == []


def test_assert_replays_raises_the_report(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    assert_replays(recorded[2], support.support(fake.openai_url))
    edited = support.support(fake.openai_url, system="Refund everything.")
    with pytest.raises(AssertionError) as raised:
        assert_replays(recorded[2], edited)
    message = str(raised.value)
    assert "DIVERGED" in message and "first divergence at step 2 (llm), call 0" in message
    assert '+ "Refund everything."' in message


# -- gathers -------------------------------------------------------------------------


def _fanout(second: str) -> Workflow:
    @tool(effect="read", name="price")
    def price(item: str) -> int:
        support._count("price")
        return len(item)

    wf = Workflow("fanout")

    @wf.step(entry=True)
    async def prices(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        async def one(branch: savegame.StepContext, item: str) -> int:
            first = await branch.acall(price, item)
            return first + await branch.acall(price, item + "!")

        totals = await ctx.map(one, ["kettle", second])
        return {"totals": totals}, END

    return wf


def test_a_gather_replays_and_a_changed_branch_is_named(
    tmp_path: Path, counted: Path, fake: provider.FakeProvider
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'g.db'}") as sg:
        done = sg.run(_fanout("toaster"), {})
        assert done.state["totals"] == [13, 15]
        sg.export(done.run_id, tmp_path / "g.sgrun")
    assert len(support.tool_calls()) == 4
    report = replay_file(tmp_path / "g.sgrun", against=_fanout("toaster"))
    assert report.identical and report.runs[0].reused == 4, report.text()
    changed = replay_file(tmp_path / "g.sgrun", against=_fanout("teapot"))
    d = changed.runs[0].divergence
    assert d is not None
    assert (d.step, d.position, d.call) == (1, "1:0:b1:0", 0)
    assert [(c.path, c.old, c.new) for c in d.changes] == [
        (("arguments", "item"), "toaster", "teapot")
    ]
    assert "[1:0:b1:0]" in changed.text()
    assert len(support.tool_calls()) == 4  # none of the replays called one


# -- what is refused -------------------------------------------------------------------------


def test_a_damaged_export_is_refused_naming_the_file(
    recorded: tuple[str, Path, Path], tmp_path: Path, fake: provider.FakeProvider
) -> None:
    data = bytearray(recorded[2].read_bytes())
    data[len(data) // 2] ^= 0x55
    broken = tmp_path / "edited.sgrun"
    broken.write_bytes(bytes(data))
    with pytest.raises(DamagedExportError) as raised:
        replay_file(broken, against=support.support(fake.openai_url))
    assert str(broken) in str(raised.value) and raised.value.file == str(broken)
    cut = tmp_path / "cut.sgrun"
    cut.write_bytes(recorded[2].read_bytes()[:200])
    with pytest.raises(DamagedExportError, match=r"cut\.sgrun"):
        replay_file(cut, against=support.support(fake.openai_url))
    with pytest.raises(NotFoundError, match=r"nothere\.sgrun"):
        replay_file(tmp_path / "nothere.sgrun", against=support.support(fake.openai_url))


def test_an_unknown_run_and_another_workflow_are_refused(
    recorded: tuple[str, Path, Path], fake: provider.FakeProvider
) -> None:
    with (
        savegame.connect(f"sqlite:///{recorded[1]}") as sg,
        pytest.raises(NotFoundError, match="no-such-run"),
    ):
        sg.replay("no-such-run", against=support.support(fake.openai_url))
    with pytest.raises(ConfigurationError, match=r"recorded by workflow 'support'.*'fanout'"):
        replay_file(recorded[2], against=_fanout("x"))


def test_the_report_is_a_record(
    recorded: tuple[str, Path, Path], fake: provider.FakeProvider
) -> None:
    report = replay_file(recorded[2], against=support.support(fake.openai_url))
    assert isinstance(report, ReplayReport)
    with pytest.raises(AttributeError):
        report.runs = ()  # type: ignore[misc]


# -- what people and events answered ------------------------------------------------------


def _asks(question: str) -> Workflow:
    wf = Workflow("asks")

    @wf.step(entry=True)
    def plan(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"plan": ctx.interrupt({"question": question}, name="plan")}, "paid"

    @wf.step()
    def paid(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"paid": ctx.wait_for("paid")}, END

    return wf


def test_a_persons_answer_and_an_event_are_answered_from_the_journal(tmp_path: Path) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'a.db'}") as sg:
        asked = sg.run(_asks("Which plan?"), {})
        assert asked.status is RunStatus.INTERRUPTED
        sg.export(asked.run_id, tmp_path / "asked.sgrun")
        answered = sg.supply(asked.run_id, "pro", workflow=_asks("Which plan?"))
        assert answered.result is not None and answered.result.status is RunStatus.WAITING
        sg.export(asked.run_id, tmp_path / "waits.sgrun")
        sg.send(asked.run_id, "paid", 42)
        done = sg.resume(asked.run_id, workflow=_asks("Which plan?"))
        assert done.state == {"plan": "pro", "paid": 42}
        sg.export(asked.run_id, tmp_path / "done.sgrun")
    for name in ("asked", "waits", "done"):
        report = replay_file(tmp_path / f"{name}.sgrun", against=_asks("Which plan?"))
        assert report.identical, report.text()
        [run] = report.runs
        assert (run.note is None) == (name == "done"), run.note
    changed = replay_file(tmp_path / "done.sgrun", against=_asks("Which plan, really?"))
    d = changed.runs[0].divergence
    assert d is not None and (d.step, d.position) == (1, "1:0")
    assert d.asked is not None and d.asked.kind == "interrupt"
    assert [(c.path, c.old, c.new) for c in d.changes] == [
        (("payload", "question"), "Which plan?", "Which plan, really?")
    ]


def test_a_rejected_refund_replays_and_the_ci_example_passes(
    counted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runs the CI example keeps: one refund approved, one rejected (the model was told).
    monkeypatch.delenv("SAVEGAME_EXAMPLE_MODEL", raising=False)
    path = support.EXAMPLE.parent / "replay_ci" / "test_recorded_runs.py"
    spec = importlib.util.spec_from_file_location("replay_ci_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [p.name for p in module.RUNS] == ["refund-approved.sgrun", "refund-rejected.sgrun"]
    for run in module.RUNS:
        module.test_a_recorded_run_replays(run)
    report = replay_file(module.RUNS[1], against=module.support_agent.agent)
    assert report.identical and report.runs[0].steps == 4
    # Asked to refund another amount there, the rejection answers nothing: a divergence.
    edited = support.support("http://127.0.0.1:9/v1", refund=support.refund_in_currency())
    [run] = replay_file(module.RUNS[1], against=edited).diverged
    assert run.divergence is not None and run.divergence.recorded is not None
    assert (run.divergence.step, run.divergence.recorded.kind) == (3, "approval")
    assert support.tool_calls() == []


def test_the_guides_ci_test_passes_on_the_ci_examples_runs(
    counted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/guides/changing-agents.md's pytest file, in a folder with the support agent and
    # the runs examples/replay_ci keeps.
    monkeypatch.delenv("SAVEGAME_EXAMPLE_MODEL", raising=False)
    code = doc_example("docs/guides/changing-agents.md", containing="assert_replays(")
    folder = tmp_path / "ci"
    shutil.copytree(support.EXAMPLE.parent / "replay_ci" / "runs", folder / "runs")
    for name in ("support_agent.py", "_common.py"):
        shutil.copy(support.EXAMPLE.parent / name, folder)
    (folder / "test_runs.py").write_text(code)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    spec = importlib.util.spec_from_file_location("guide_ci", folder / "test_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_recorded_runs_still_replay()
    # And it fails, with the report, once a run does not replay.
    (folder / "support_agent.py").write_text(
        (folder / "support_agent.py").read_text().replace("Be brief.", "Be terse.")
    )
    monkeypatch.delitem(sys.modules, "support_agent")
    exec_again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exec_again)
    with pytest.raises(AssertionError, match=r"2 runs diverged|0 of 2 runs identical"):
        exec_again.test_recorded_runs_still_replay()


# -- calls dropped, steps dropped or added ---------------------------------------------------


def _orders(*, lookups: int = 2, reply: bool = True, tail: bool = False) -> Workflow:
    @tool(effect="read", name="stock")
    def stock(item: str) -> int:
        support._count("stock")
        return 3

    wf = Workflow("orders")

    @wf.step(entry=True)
    def look(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        found = [ctx.call(stock, item) for item in ["kettle", "toaster"][:lookups]]
        return {"stock": found}, "answer" if reply else END

    @wf.step()
    def answer(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"reply": f"{sum(state['stock'])} in stock"}, "thank" if tail else END

    @wf.step()
    def thank(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"thanked": True}, END

    return wf


def test_a_call_dropped_a_step_dropped_and_a_step_added_are_divergences(
    tmp_path: Path, counted: Path
) -> None:
    (tmp_path / "runs").mkdir()
    with savegame.connect(f"sqlite:///{tmp_path / 'o.db'}") as sg:
        sg.run(_orders(), {}, run_id="order-1")
        sg.export("order-1", tmp_path / "runs" / "order-1.sgrun")
    (tmp_path / "runs" / "README.md").write_text("runs kept for CI\n")
    calls = support.tool_calls()
    assert replay_file(tmp_path / "runs", against=_orders()).identical

    [fewer] = replay_file(tmp_path / "runs", against=_orders(lookups=1)).runs
    d = fewer.divergence
    assert d is not None and (d.step, d.position, d.asked) == (1, "1:1", None)
    assert d.recorded is not None and d.recorded.arguments == {"item": "toaster"}
    assert "the step made 1 calls; the journal holds more" in d.reason

    [shorter] = replay_file(tmp_path / "runs", against=_orders(reply=False)).runs
    d = shorter.divergence
    assert d is not None and d.step == 2
    assert d.reason == (
        "the recording completed after step 2 (answer); the replay completed after step 1 (look)"
    )

    [longer] = replay_file(tmp_path / "runs", against=_orders(tail=True)).runs
    d = longer.divergence
    assert d is not None and (d.step, d.node) == (3, "thank")
    assert support.tool_calls() == calls


def test_a_folder_without_export_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("no runs yet\n")
    with pytest.raises(NotFoundError, match="export file in folder"):
        replay_file(tmp_path, against=_orders())


def test_live_from_the_divergence_asks_the_model_from_there_in_the_scratch_store(
    recorded: tuple[str, Path, Path], counted: Path, fake: provider.FakeProvider
) -> None:
    _, db, export = recorded
    before = _digest(db)
    fake.script(CHAT, chat("We do not refund kettles."))
    edited = support.support(fake.openai_url, system="Refund nothing.")
    report = replay_file(export, against=edited, live=True)
    [run] = report.runs
    live = run.live
    assert live is not None and run.divergence is not None
    assert (live.status, live.step, live.error) == (RunStatus.COMPLETED, 2, None)
    assert live.called == ("2:0 llm:gpt-4o-mini",)
    changes = {c.path: c for c in live.changes}
    assert changes[("answer",)].old == "Refunded 120 for your kettle (A-1)."
    assert changes[("answer",)].new == "We do not refund kettles."
    # One request, with the new prompt; no tool called; the store it came from untouched.
    [body] = fake.bodies(CHAT)
    assert body["messages"][0] == {"role": "system", "content": "Refund nothing."}
    assert support.tool_calls() == [] and _digest(db) == before
    assert (
        "live from the divergence: completed after step 2"
        in replay_file(export, against=support.support(fake.openai_url)).text()
        or True
    )  # an identical run is not run live
    assert (
        replay_file(export, against=support.support(fake.openai_url), live=True).runs[0].live
        is None
    )


def test_a_workspace_replays_into_a_scratch_folder(tmp_path: Path, counted: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()

    @tool(effect="write", name="write_note")
    def write_note(text: str) -> int:
        support._count("write_note")
        return (folder / "notes.txt").write_text(text)

    wf = Workflow("notes", workspace=str(folder))

    @wf.step(entry=True)
    def write(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"written": ctx.call(write_note, state["text"])}, "done"

    @wf.step()
    def done(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
        return {"done": True}, END

    with savegame.connect(f"sqlite:///{tmp_path / 'w.db'}") as sg:
        sg.run(wf, {"text": "recorded"}, run_id="notes-1")
        sg.export("notes-1", tmp_path / "notes.sgrun")
    (folder / "notes.txt").write_text("mine since")
    (folder / "other.txt").write_text("mine too")
    calls = support.tool_calls()
    # The files are not compared (the tool that wrote them is not called); the folder the
    # replay snapshots is a scratch one, this one is left as it is.
    assert replay_file(tmp_path / "notes.sgrun", against=wf).identical
    assert (folder / "notes.txt").read_text() == "mine since"
    assert (folder / "other.txt").read_text() == "mine too"
    assert support.tool_calls() == calls


def test_an_export_edited_with_its_checksums_remade_is_refused(
    recorded: tuple[str, Path, Path], tmp_path: Path, fake: provider.FakeProvider
) -> None:
    # Someone raised the recorded refund to 1200 and wrote the file's frames and digest
    # anew: the journal entry's own check still names the edit.
    data = recorded[2].read_bytes()
    edited = tmp_path / "forged.sgrun"
    with edited.open("wb") as out:
        writer = _archive.Writer(out)
        for _, _, obj in _archive.frames(data, _archive.Budget(len(data))):
            if obj.get("type") == "end":
                continue
            if obj.get("type") == "effect":
                entry = _archive.from_json(EffectRecord, obj["entry"])
                if entry.name == "issue_refund" and entry.kind is EffectKind.WRITE:
                    forged = {"order_id": "A-1", "amount": 1200}
                    entry = replace(entry, arguments=encode_value(forged, "arguments"))
                    obj = {**obj, "entry": _archive.to_json(entry)}
            writer.write(obj)
        writer.end()
    with pytest.raises(DamagedExportError) as raised:
        replay_file(edited, against=support.support(fake.openai_url))
    message = str(raised.value)
    assert str(edited) in message, message
    assert f"{recorded[0]}:5:0: journal entry checksum mismatch" in message, message


def test_a_threads_runs_replay_each_from_its_own_first_checkpoint(
    tmp_path: Path, counted: Path, fake: provider.FakeProvider
) -> None:
    # A conversation of two runs on one thread: the second starts from the first's end.
    fake.script(CHAT, chat("Hello! How can I help?"), chat("A-1 is a kettle."))
    agent = support.support(fake.openai_url)
    with savegame.connect(f"sqlite:///{tmp_path / 't.db'}") as sg:
        sg.run(agent, {"input": "hi"}, thread_id="chat-1")
        sg.run(agent, {"input": "what is A-1?"}, thread_id="chat-1")
        sg.export("chat-1", tmp_path / "chat.sgrun")
        from_store = sg.replay("chat-1", against=agent)
    asked = len(fake.asked)
    report = replay_file(tmp_path / "chat.sgrun", against=agent)
    assert report.identical and from_store.identical, report.text()
    assert [(r.steps, r.reused) for r in report.runs] == [(2, 1), (2, 1)]
    edited = support.support(fake.openai_url, system="Answer in French.")
    first, second = replay_file(tmp_path / "chat.sgrun", against=edited).runs
    # The prompt is in the first run's conversation only: the second run starts from the
    # recorded state, which holds the old prompt, and replays identical.
    assert first.divergence is not None and second.identical
    assert len(fake.asked) == asked


def test_a_renamed_workflow_replays_the_runs_of_its_old_name(tmp_path: Path, counted: Path) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'r.db'}") as sg:
        sg.run(_orders(), {}, run_id="order-1")
        sg.export("order-1", tmp_path / "order.sgrun")
    renamed = _orders()
    renamed.name = "stock-answers"
    with pytest.raises(ConfigurationError, match="recorded by workflow 'orders'"):
        replay_file(tmp_path / "order.sgrun", against=renamed)
    report = replay_file(tmp_path / "order.sgrun", against={"orders": renamed})
    assert report.identical and report.runs[0].workflow == "orders"
    assert renamed.name == "stock-answers"  # the workflow given is left as it is
    # On the command line: NAME=MODULE:ATTR, exit 0; a change, exit 6 with the report.
    module = tmp_path / "flows.py"
    module.write_text(
        "from tests.replay.test_replay import _orders\n"
        "renamed = _orders()\nrenamed.name = 'stock-answers'\n"
        "fewer = _orders(lookups=1)\nfewer.name = 'stock-answers'\n"
    )
    runner = CliRunner()
    same = runner.invoke(
        app, ["replay", str(tmp_path / "order.sgrun"), "--against", f"orders={module}:renamed"]
    )
    assert same.exit_code == 0, same.output
    assert "1 of 1 run identical" in same.stdout
    changed = runner.invoke(
        app, ["replay", str(tmp_path / "order.sgrun"), "--against", f"orders={module}:fewer"]
    )
    assert changed.exit_code == 6, changed.output
    assert "first divergence at step 1 (look), call 1" in changed.stdout
    assert "1 run diverged from the code" in changed.stderr


def test_an_encrypted_export_replays_with_its_keys_only(tmp_path: Path, counted: Path) -> None:
    storage = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    with savegame.connect(f"sqlite:///{tmp_path / 'e.db'}", storage=storage) as sg:
        sg.run(_orders(), {}, run_id="order-1")
        sg.export("order-1", tmp_path / "sealed.sgrun")
    report = replay_file(tmp_path / "sealed.sgrun", against=_orders(), storage=storage)
    assert report.identical and report.runs[0].reused == 2
    changed = replay_file(tmp_path / "sealed.sgrun", against=_orders(lookups=1), storage=storage)
    d = changed.runs[0].divergence
    assert d is not None and d.recorded is not None
    assert d.recorded.arguments == {"item": "toaster"}  # opened with the key, for the report
    with pytest.raises(EncryptionKeyError):
        replay_file(tmp_path / "sealed.sgrun", against=_orders(), storage=StorageConfig())


def test_a_change_behind_ctx_patched_replays_identical(tmp_path: Path, counted: Path) -> None:
    # The old runs take the old path where they had been (ctx.patched answers False
    # there), so the recording replays; the same change unguarded diverges.
    def guarded() -> Workflow:
        @tool(effect="read", name="stock")
        def stock(item: str) -> int:
            support._count("stock")
            return 3

        wf = Workflow("orders")

        @wf.step(entry=True)
        def look(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
            items = ["kettle"] if ctx.patched("one-lookup") else ["kettle", "toaster"]
            return {"stock": [ctx.call(stock, item) for item in items]}, "answer"

        @wf.step()
        def answer(state: dict, ctx: savegame.StepContext) -> tuple[dict, str]:
            return {"reply": f"{sum(state['stock'])} in stock"}, END

        return wf

    with savegame.connect(f"sqlite:///{tmp_path / 'p.db'}") as sg:
        sg.run(_orders(), {}, run_id="order-1")
        sg.export("order-1", tmp_path / "order.sgrun")
        fresh = sg.run(guarded(), {}, run_id="order-2")
        assert fresh.state["stock"] == [3]  # a new run takes the new path
    assert replay_file(tmp_path / "order.sgrun", against=guarded()).identical
    assert not replay_file(tmp_path / "order.sgrun", against=_orders(lookups=1)).identical

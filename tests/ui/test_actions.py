"""Actions from the UI: a confirmation first, then the public API with the person's name."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import savegame
from savegame import RunStatus
from savegame.model import EffectKind
from savegame.ui import create_app
from tests.ui.conftest import ORIGIN, csrf_of
from tests.ui.shop import asks, flaky, wf

ROOT = Path(__file__).resolve().parents[2]
SRC = str(Path(savegame.__file__).resolve().parents[1])


def _settled(url: str, run_id: str, *statuses: RunStatus) -> RunStatus:
    """The run's status once it is one of ``statuses`` (it goes on in the UI's thread)."""
    deadline = time.monotonic() + 20
    status = savegame.client.get_run(run_id, store=url).status
    while status not in statuses and time.monotonic() < deadline:
        time.sleep(0.05)
        status = savegame.client.get_run(run_id, store=url).status
    return status


def _do(c: TestClient, path: str, **form: str) -> tuple[str, str]:
    """POST the action unconfirmed (the confirmation page), then confirmed."""
    form["csrf_token"] = csrf_of(c)
    asked = c.post(path, data=form)
    assert asked.status_code == 200 and "Confirm:" in asked.text
    done = c.post(path, data={**form, "confirmed": "1"}, follow_redirects=False)
    return asked.text, done.headers.get("location", done.text)


def test_approve_with_edited_arguments_continues_the_run(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {"amount": 42}, store=ui_url)
    c = client()
    asked, went = _do(c, f"/runs/{r.run_id}/approve", interrupt_id=r.interrupt_id or "",
                      edit='{"order_id": "o1", "amount": 20}', by="ana")  # fmt: skip
    assert "<b>charge</b>" in asked and ">42<" in asked and "&#34;amount&#34;: 20" in asked
    assert went == f"/runs/{r.run_id}?done=approved"
    assert _settled(ui_url, r.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    approval, write = savegame.client.list_effects(r.run_id, store=ui_url)
    assert approval.kind is EffectKind.APPROVAL and approval.metadata["by"] == "ana"
    assert write.result == {"charge_id": "ch_o1", "amount": 20}


def test_an_edit_the_tool_cannot_take_is_refused_before_it_is_recorded(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {}, store=ui_url)
    c = client()
    form = {"interrupt_id": r.interrupt_id or "", "edit": '{"amount": 1, "tip": 2}', "by": "ana",
            "csrf_token": csrf_of(c), "confirmed": "1"}  # fmt: skip
    refused = c.post(f"/runs/{r.run_id}/approve", data=form)
    assert refused.status_code == 400 and "tip" in refused.text
    not_json = c.post(f"/runs/{r.run_id}/approve", data={**form, "edit": "{amount"})
    assert not_json.status_code == 400 and "not JSON" in not_json.text
    anonymous = c.post(f"/runs/{r.run_id}/approve", data={**form, "edit": "", "by": ""})
    assert anonymous.status_code == 400 and "say who you are" in anonymous.text
    assert savegame.client.pending_interrupts(r.run_id, store=ui_url)  # still waiting


def test_reject_needs_a_reason_and_records_it(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {}, store=ui_url)
    c = client()
    path = f"/runs/{r.run_id}/reject"
    form = {"interrupt_id": r.interrupt_id or "", "by": "ana", "csrf_token": csrf_of(c)}
    assert c.post(path, data={**form, "confirmed": "1"}).status_code == 400
    _do(c, path, interrupt_id=r.interrupt_id or "", by="ana", reason="too <b>much</b>")
    (entry,) = savegame.client.list_effects(r.run_id, store=ui_url)
    assert entry.error == "too <b>much</b>" and entry.metadata["by"] == "ana"
    # The step did not catch ApprovalRejected: the run failed with it.
    assert _settled(ui_url, r.run_id, RunStatus.FAILED) is RunStatus.FAILED
    assert "too &lt;b&gt;much&lt;/b&gt;" in c.get(f"/runs/{r.run_id}").text


def test_resolve_an_in_doubt_write_then_resume(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    with pytest.raises(savegame.errors.InDoubtEffectError):
        savegame.run(flaky, {}, store=ui_url)
    (stuck,) = savegame.client.list_runs(store=ui_url)
    (entry,) = savegame.client.list_effects(stuck.run_id, store=ui_url)
    c = client()
    asked, _ = _do(c, f"/runs/{stuck.run_id}/resolve", request_id=entry.request_id, done="yes",
                   result='{"charge_id": "ch_by_hand"}', by="ana")  # fmt: skip
    assert "flaky_charge" in asked
    (settled,) = savegame.client.list_effects(stuck.run_id, store=ui_url)
    assert settled.result == {"charge_id": "ch_by_hand"} and settled.metadata["by"] == "ana"
    _do(c, f"/runs/{stuck.run_id}/resume")  # the module imports here: it ends in the UI's thread
    assert _settled(ui_url, stuck.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    assert savegame.client.get_checkpoint(stuck.run_id, store=ui_url).state["receipt"] == {
        "charge_id": "ch_by_hand"
    }


def test_cancel_a_waiting_run_names_who_cancelled(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {}, store=ui_url)
    c = client()
    form = {"csrf_token": csrf_of(c), "confirmed": "1"}
    anonymous = c.post(f"/runs/{r.run_id}/cancel", data=form)
    assert anonymous.status_code == 400 and "say who you are" in anonymous.text
    _do(c, f"/runs/{r.run_id}/cancel", by="cy")
    assert savegame.client.get_run(r.run_id, store=ui_url).status is RunStatus.CANCELLED
    assert savegame.client.pending_interrupts(r.run_id, store=ui_url) == []
    marker = savegame.client.history(r.run_id, store=ui_url)[0]
    assert marker.status is RunStatus.CANCELLED and marker.metadata["cancelled_by"] == "cy"
    (closed,) = savegame.client.list_effects(r.run_id, store=ui_url)
    assert closed.metadata["by"] == "cy" and closed.error == "run cancelled"
    assert "cancelled by cy" in c.get(f"/runs/{r.run_id}").text


def test_answer_an_interrupt_with_a_json_value_and_the_run_goes_on(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(asks, {}, store=ui_url)
    assert r.status is RunStatus.INTERRUPTED
    c = client()
    page = c.get(f"/runs/{r.run_id}").text
    assert f'action="/runs/{r.run_id}/supply"' in page and "which size?" in page
    asked, went = _do(c, f"/runs/{r.run_id}/supply", interrupt_id=r.interrupt_id or "",
                      value='{"size": "M", "gift": true}', by="ana")  # fmt: skip
    assert "Answer <b>size</b>" in asked and "which size?" in asked and "gift" in asked
    assert went == f"/runs/{r.run_id}?done=answered"
    assert _settled(ui_url, r.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    state = savegame.client.get_checkpoint(r.run_id, store=ui_url).state
    assert state["shipped"] == {"size": "M", "gift": True}
    (entry,) = savegame.client.list_effects(r.run_id, store=ui_url)
    assert entry.kind is EffectKind.INTERRUPT and entry.metadata["by"] == "ana"
    assert entry.result == {"size": "M", "gift": True}


def test_an_answer_that_is_not_json_or_has_no_name_is_refused_and_nothing_recorded(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(asks, {}, store=ui_url)
    c = client()
    path = f"/runs/{r.run_id}/supply"
    form = {"interrupt_id": r.interrupt_id or "", "by": "ana", "csrf_token": csrf_of(c)}
    for value in ("M", "{size", ""):  # a bare word is not JSON: "M" in quotes is
        asked = c.post(path, data={**form, "value": value})
        assert asked.status_code == 400 and "the value is not JSON" in asked.text, value
        done = c.post(path, data={**form, "value": value, "confirmed": "1"})
        assert done.status_code == 400, value
    anonymous = c.post(path, data={**form, "value": '"M"', "by": "", "confirmed": "1"})
    assert anonymous.status_code == 400 and "say who you are" in anonymous.text
    wrong = c.post(path, data={**form, "value": '"M"', "interrupt_id": "nope", "confirmed": "1"})
    assert wrong.status_code == 400 and "does not wait for &#39;nope&#39;" in wrong.text
    assert [w.interrupt_id for w in savegame.client.pending_interrupts(r.run_id, store=ui_url)] == [
        r.interrupt_id
    ]


def test_an_approval_is_not_answered_with_a_value(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {}, store=ui_url)
    c = client()
    form = {"interrupt_id": r.interrupt_id or "", "by": "ana", "value": "true",
            "csrf_token": csrf_of(c), "confirmed": "1"}  # fmt: skip
    refused = c.post(f"/runs/{r.run_id}/supply", data=form)
    assert refused.status_code == 400 and "is an approval: approve or reject it" in refused.text
    assert savegame.client.pending_interrupts(r.run_id, store=ui_url)


def test_fork_from_a_checkpoint_with_an_edit(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {"amount": 42}, store=ui_url)
    planned = next(h for h in savegame.client.history(r.run_id, store=ui_url) if h.node == "plan")
    c = client(continue_runs=False)
    asked, went = _do(c, f"/checkpoints/{planned.checkpoint_id}/fork", set="order.amount=7",
                      reason="cheaper", by="bo", mode="replay")  # fmt: skip
    assert "order.amount=7" in asked and "The origin run is not changed" in asked
    forked = went.split("?")[0].rsplit("/", 1)[1]
    node = savegame.client.tree(r.run_id, store=ui_url).node(forked)
    assert node.forked and (node.by, node.reason, node.edited) == (
        "bo",
        "cheaper",
        ("order.amount",),
    )
    assert savegame.client.get_checkpoint(forked, store=ui_url).state["order"]["amount"] == 7


def test_supply_the_public_call_behind_the_form_continues_here_and_answers_once(
    ui_url: str,
) -> None:
    r = savegame.run(asks, {}, store=ui_url)
    decision = savegame.supply(r.run_id, "S", by="ana", store=ui_url, workflow=asks)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["shipped"] == "S" and decision.entry.metadata["by"] == "ana"
    with pytest.raises(savegame.SavegameError):  # nothing waits any more
        savegame.supply(r.run_id, "M", by="bo", store=ui_url, resume=False)
    with pytest.raises(savegame.errors.SerializationError):  # a value that is not pure data
        savegame.supply(savegame.run(asks, {}, store=ui_url).run_id, object(), store=ui_url)


def test_a_run_whose_owner_was_killed_says_so_and_is_resumed_from_its_page(
    client: Callable[..., TestClient], ui_url: str, tmp_path: Path
) -> None:
    gate, entered = tmp_path / "gate", tmp_path / "entered"
    code = (
        "import sys, savegame\nfrom tests.ui.shop import gated\n"
        "savegame.run(gated, {'gate': sys.argv[1], 'entered': sys.argv[2]}, run_id='g1',"
        " store=sys.argv[3])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(ROOT)])}
    child = subprocess.Popen([sys.executable, "-c", code, str(gate), str(entered), ui_url],
                             cwd=ROOT, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not entered.exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        child.kill()  # SIGKILL in its step: the run stays running, its lease held
        child.wait()
    c = client()
    listed = c.get("/runs").text
    row = listed[listed.index('<tr data-run="g1">') :].split("</tr>")[0]
    assert 's-running">running</span>' in row and ">owner gone</span>" in row
    page = c.get("/runs/g1").text
    assert f"PID {child.pid} on host " in page and "owner gone" in page
    assert "/runs/g1/resume" in page  # the page offers to continue it
    gate.touch()
    _do(c, "/runs/g1/resume", by="ana")
    assert _settled(ui_url, "g1", RunStatus.COMPLETED) is RunStatus.COMPLETED
    assert ">owner gone</span>" not in c.get("/runs").text


def test_the_ui_remembers_who_decided_whatever_the_name(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    """A name a latin-1 header cannot hold is remembered too (it broke the redirect after
    the decision was recorded), for a year, and offered on the next confirmation."""
    name = "Łukasz Żółć 王; ops"
    first = savegame.run(wf, {"order_id": "o1"}, store=ui_url)
    c = client()
    form = {"interrupt_id": first.interrupt_id or "", "by": name, "csrf_token": csrf_of(c)}
    done = c.post(f"/runs/{first.run_id}/reject", data={**form, "reason": "no", "confirmed": "1"},
                  follow_redirects=False)  # fmt: skip
    assert done.status_code == 303, done.text
    cookie = done.headers["set-cookie"]
    assert cookie.startswith("sg_by=") and "Max-Age=31536000" in cookie and "HttpOnly" in cookie
    (entry,) = savegame.client.list_effects(first.run_id, store=ui_url)
    assert entry.metadata["by"] == name

    second = savegame.run(wf, {"order_id": "o2"}, store=ui_url)
    asked = c.post(f"/runs/{second.run_id}/approve",
                   data={"interrupt_id": second.interrupt_id or "", "csrf_token": csrf_of(c)})  # fmt: skip
    assert f'<input name="by" value="{name}" required>' in asked.text


def test_an_app_over_a_handle_reads_and_acts_through_it_with_its_keys(tmp_path: Path) -> None:
    keys = savegame.StorageConfig(
        keyring=savegame.codec.crypto.Keyring({"k1": os.urandom(32)}, active="k1")
    )
    with savegame.connect(f"sqlite:///{tmp_path / 'held.db'}", storage=keys) as sg:
        r = sg.run(wf, {"note": "the plan", "amount": 7})
        with TestClient(create_app(sg), base_url=ORIGIN) as c:
            # The handle's keys, not the environment's (it has none): the state shows.
            assert "the plan" in c.get(f"/checkpoints/{r.checkpoint_id}").text
            _do(c, f"/runs/{r.run_id}/approve", interrupt_id=r.interrupt_id or "", by="ana")
            deadline = time.monotonic() + 20
            while sg.get_run(r.run_id).status is not RunStatus.COMPLETED:
                assert time.monotonic() < deadline, sg.get_run(r.run_id).status
                time.sleep(0.05)
        assert not sg.closed  # the app never closes a handle it was given
        [approval, charged] = sg.effects(r.run_id)
        assert (approval.metadata["by"], charged.result["amount"]) == ("ana", 7)
    with pytest.raises(savegame.errors.ConfigurationError, match="its own storage"):
        create_app(savegame.connect("memory://"), storage=keys)

"""Attack on the UI's decisions (issue 30, point 10): who may act from the UI: named tokens with roles (a viewer reads, an approver also
decides), a read-only server, and the token's name recorded beside the name a person
types. The action routes are enumerated from the app itself, so a route added later is
covered without touching these tests."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

import savegame
from savegame import RunStatus
from savegame.cli import app as cli
from savegame.errors import ConfigurationError
from savegame.model import EffectKind
from savegame.ui import UIToken, create_app
from savegame.ui._tokens import gather, parse_token, read_token_file
from tests.ui.conftest import ORIGIN, csrf_of
from tests.ui.shop import asks, flaky, wf
from tests.ui.test_actions import _do, _settled

ALICE = "alice-approver-secret-0123"
BOB = "bob-viewer-secret-456789"
TOKENS = (UIToken("alice", ALICE, "approver"), UIToken("bob", BOB, "viewer"))
POST_FORM = re.compile(r'<form[^>]*method="post"')


def _as(c: TestClient, secret: str) -> TestClient:
    c.headers["authorization"] = f"Bearer {secret}"
    return c


def _post_routes(app: Any) -> list[Route]:
    return [r for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]


def _action_paths(url: str) -> Iterator[str]:
    """Every POST route of a full UI (its parameters filled with a waiting run's ids)."""
    r = savegame.run(wf, {}, store=url)
    ids = {"run_id": r.run_id, "checkpoint_id": r.checkpoint_id}
    routes = _post_routes(create_app(url))
    # approve, reject, supply, resolve, cancel, resume, fork: if none were found, the
    # enumeration (not the guard) would be broken and every test below would pass vacuously
    assert len(routes) >= 7, [r.path for r in routes]
    for route in routes:
        yield route.path_format.format(**{name: ids[name] for name in route.param_convertors})


def _nothing_decided(url: str) -> None:
    for run in savegame.client.list_runs(store=url):
        assert run.status is RunStatus.INTERRUPTED, run
        assert savegame.client.pending_interrupts(run.run_id, store=url)
    assert all(not savegame.client.tree(r.run_id, store=url).node(r.run_id).children
               for r in savegame.client.list_runs(store=url))  # fmt: skip


def test_a_viewers_token_reads_every_page_and_every_action_is_refused(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    paths = list(_action_paths(ui_url))
    viewer = _as(client(tokens=TOKENS), BOB)
    approver = _as(client(tokens=TOKENS), ALICE)
    (run,) = savegame.client.list_runs(store=ui_url)
    for path in paths:
        form = {"csrf_token": csrf_of(viewer), "confirmed": "1", "by": "mallory", "reason": "no"}
        refused = viewer.post(path, data=form)
        assert refused.status_code == 403, path
        assert "the token 'bob' is a viewer's" in refused.text, path
        # refused for the role before anything else is read: no CSRF token needed to learn it
        bare = viewer.post(path, data={"confirmed": "1", "by": "mallory"})
        assert bare.status_code == 403 and "a viewer's" in bare.text, path
        # the same request unconfirmed, with an approver's token, reaches the action
        assert approver.post(path, data={"csrf_token": csrf_of(approver)}).status_code != 403
    _nothing_decided(ui_url)
    head = savegame.client.history(run.run_id, store=ui_url)[0]
    for page in ("/runs", f"/runs/{run.run_id}", f"/checkpoints/{head.checkpoint_id}",
                 "/approvals"):  # fmt: skip
        shown = viewer.get(page)
        assert shown.status_code == 200 and "bob · viewer" in shown.text, page
        assert not POST_FORM.search(shown.text), page  # no button to press
    assert 'data-run="' + run.run_id in viewer.get("/approvals").text  # the card, without forms
    assert POST_FORM.search(approver.get(f"/runs/{run.run_id}").text)


def test_a_read_only_ui_mounts_no_action_shows_no_form_and_refuses_every_post(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    paths = list(_action_paths(ui_url))
    c = client(read_only=True)
    assert _post_routes(c.app) == []
    (run,) = savegame.client.list_runs(store=ui_url)
    for path in [*paths, "/runs", "/anything"]:
        refused = c.post(path, data={"csrf_token": csrf_of(c), "confirmed": "1", "by": "m"})
        assert refused.status_code == 403, path
        assert "this savegame UI is read-only (savegame ui --read-only)" in refused.text
    _nothing_decided(ui_url)
    head = savegame.client.history(run.run_id, store=ui_url)[0]
    for page in (f"/runs/{run.run_id}", f"/checkpoints/{head.checkpoint_id}", "/approvals"):
        shown = c.get(page)
        assert shown.status_code == 200 and ">read-only</span>" in shown.text, page
        assert not POST_FORM.search(shown.text) and "Fork from here" not in shown.text, page
    # with tokens, an approver's one too: read-only is the server's mode, above any role
    tokened = _as(client(tokens=TOKENS, read_only=True), ALICE)
    assert tokened.post(paths[0], data={"csrf_token": csrf_of(tokened)}).status_code == 403


def test_every_decision_an_approver_makes_records_the_token_beside_the_name_typed(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    c = _as(client(tokens=TOKENS), ALICE)
    alice = "ui-token:alice"

    approved = savegame.run(wf, {}, store=ui_url)
    _do(c, f"/runs/{approved.run_id}/approve", interrupt_id=approved.interrupt_id or "", by="ana")
    rejected = savegame.run(wf, {}, store=ui_url)
    _do(c, f"/runs/{rejected.run_id}/reject", interrupt_id=rejected.interrupt_id or "",
        reason="no", by="ana")  # fmt: skip
    answered = savegame.run(asks, {}, store=ui_url)
    _do(c, f"/runs/{answered.run_id}/supply", interrupt_id=answered.interrupt_id or "",
        value='"M"', by="ana")  # fmt: skip
    for r in (approved, rejected, answered):
        entry = next(e for e in savegame.client.list_effects(r.run_id, store=ui_url)
                     if e.kind in (EffectKind.APPROVAL, EffectKind.INTERRUPT))  # fmt: skip
        assert (entry.metadata["by"], entry.metadata["authenticated_as"]) == ("ana", alice)

    with pytest.raises(savegame.errors.InDoubtEffectError):
        savegame.run(flaky, {}, store=ui_url)
    stuck = next(r for r in savegame.client.list_runs(store=ui_url) if r.workflow == "flaky-shop")
    (doubt,) = savegame.client.list_effects(stuck.run_id, store=ui_url)
    _do(c, f"/runs/{stuck.run_id}/resolve", request_id=doubt.request_id, done="no", by="ana")
    (resolved,) = savegame.client.list_effects(stuck.run_id, store=ui_url)
    assert resolved.metadata["authenticated_as"] == alice

    cancelled = savegame.run(wf, {}, store=ui_url)
    _do(c, f"/runs/{cancelled.run_id}/cancel", by="cy")
    marker = savegame.client.history(cancelled.run_id, store=ui_url)[0]
    assert marker.metadata == {"cancelled_by": "cy", "authenticated_as": alice}
    (closed,) = savegame.client.list_effects(cancelled.run_id, store=ui_url)
    assert (closed.metadata["by"], closed.metadata["authenticated_as"]) == ("cy", alice)
    assert "cancelled by cy (ui-token:alice)" in c.get(f"/runs/{cancelled.run_id}").text

    origin = savegame.run(wf, {}, store=ui_url)
    _, went = _do(c, f"/checkpoints/{origin.checkpoint_id}/fork", reason="again", by="bo")
    forked = went.split("?")[0].rsplit("/", 1)[1]
    node = savegame.client.tree(origin.run_id, store=ui_url).node(forked)
    assert (node.by, node.authenticated_as) == ("bo", alice)
    assert "by bo (ui-token:alice)" in c.get(f"/runs/{origin.run_id}").text

    assert _settled(ui_url, approved.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    journal = c.get(f"/runs/{approved.run_id}").text
    assert "by ana <span" in journal and "(ui-token:alice)" in journal


def test_without_tokens_a_decision_records_the_name_alone(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    """An open (loopback) UI checked nothing: the entry says so by holding no identity."""
    r = savegame.run(wf, {}, store=ui_url)
    _do(client(), f"/runs/{r.run_id}/approve", interrupt_id=r.interrupt_id or "", by="ana")
    approval = savegame.client.list_effects(r.run_id, store=ui_url)[0]
    assert approval.metadata["by"] == "ana" and "authenticated_as" not in approval.metadata


def test_the_login_link_and_the_cookie_name_the_token_they_carry(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    c = client(tokens=TOKENS)
    assert c.get("/runs").status_code == 401
    assert c.get(f"/runs?token={BOB}").status_code == 200
    assert "bob · viewer" in c.get("/runs").text and BOB not in str(c.cookies)
    c.get(f"/runs?token={ALICE}")  # another token's link replaces the cookie
    assert "alice · approver" in c.get("/runs").text
    shared = client(token="a-shared-token-of-old")
    shared.get("/runs?token=a-shared-token-of-old")
    assert "shared · approver" in shared.get("/runs").text
    r = savegame.run(wf, {}, store=ui_url)
    _do(shared, f"/runs/{r.run_id}/approve", interrupt_id=r.interrupt_id or "", by="ana")
    approval = savegame.client.list_effects(r.run_id, store=ui_url)[0]
    assert approval.metadata["authenticated_as"] == "ui-token:shared"


def test_tokens_are_named_given_a_role_and_their_secrets_never_repeated(
    tmp_path: Path,
) -> None:
    assert parse_token("just-a-long-secret-0") == UIToken("shared", "just-a-long-secret-0")
    assert parse_token(f"bob:viewer={BOB}") == TOKENS[1]
    assert parse_token("al.ice@x:approver=se:cr=et-with-signs!") == UIToken(
        "al.ice@x", "se:cr=et-with-signs!", "approver"
    )
    assert BOB not in repr(TOKENS[1])
    for spec, why in ((f"bob:veiwer={BOB}", "role 'veiwer' is not one of viewer, approver"),
                      ("bob:viewer=short", "at least 16"), (f"bob:={BOB}", "role ''")):  # fmt: skip
        with pytest.raises(ConfigurationError, match=why) as caught:
            parse_token(spec)
        assert BOB not in str(caught.value) and "--token" in str(caught.value)
    with pytest.raises(ConfigurationError, match="two UI tokens are named 'bob'"):
        gather(tokens=[f"bob:viewer={BOB}", f"bob:approver={ALICE}"], environ={})
    with pytest.raises(ConfigurationError, match="'alice', 'bob' have the same secret"):
        gather(tokens=[f"alice:approver={BOB}", f"bob:viewer={BOB}"], environ={})

    listed = tmp_path / "tokens"
    listed.write_text(f"# who may look\n\nbob:viewer={BOB}\n  alice:approver={ALICE}  \n")
    assert read_token_file(listed) == [TOKENS[1], TOKENS[0]]
    env = {"SAVEGAME_UI_TOKEN_FILE": str(listed), "SAVEGAME_UI_TOKEN": "cy:viewer=" + "c" * 16}
    assert [t.name for t in gather(environ=env)] == ["cy", "bob", "alice"]
    assert [t.name for t in gather(tokens=[f"dee:viewer={'d' * 16}"], environ=env)] == [
        "dee", "bob", "alice",
    ]  # fmt: skip
    listed.write_text(f"bob:viewer={BOB}\nbob:vewer={BOB}\n")
    with pytest.raises(ConfigurationError, match=r"tokens, line 2: .*'vewer'") as caught:
        read_token_file(listed)
    assert BOB not in str(caught.value)


def test_the_command_refuses_a_malformed_token_without_printing_it(ui_url: str) -> None:
    result = CliRunner().invoke(
        cli, ["ui", "--store", ui_url, "--read-only", "--token", f"bob:veiwer={BOB}"],
        env={"SAVEGAME_UI_TOKEN": None, "SAVEGAME_UI_TOKEN_FILE": None},
    )  # fmt: skip
    assert result.exit_code != 0 and "'veiwer' is not one of viewer, approver" in result.output
    assert BOB not in result.output and "Traceback" not in result.output
    # read-only still shows states and journals: another host still needs a token
    open_host = CliRunner().invoke(
        cli, ["ui", "--store", ui_url, "--read-only", "--host", "0.0.0.0"],
        env={"SAVEGAME_UI_TOKEN": None, "SAVEGAME_UI_TOKEN_FILE": None},
    )  # fmt: skip
    assert open_host.exit_code != 0 and "give it a token" in open_host.output


def test_an_answer_to_a_langgraph_interrupt_records_the_token(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import HumanMessage

    from savegame.langgraph import SavegameSaver
    from tests.integrations.langgraph.test_saver import chat_graph, conf
    from tests.ui.test_langgraph import answer

    saver = SavegameSaver(ui_url)
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    asked = graph.get_state(conf("t1")).interrupts[0]
    (run,) = savegame.client.list_runs(store=ui_url)
    viewer = _as(client(tokens=TOKENS), BOB)
    form = {"interrupt_id": asked.id, "value": '"yes"', "csrf_token": csrf_of(viewer)}
    assert viewer.post(f"/runs/{run.run_id}/supply", data=form).status_code == 403
    c = _as(client(tokens=TOKENS), ALICE)
    done = answer(c, run.run_id, asked.id, '"yes"', "ana")
    assert done.status_code == 303
    (said,) = [a.answered for a in savegame.integrations.langgraph.thread_of(
        run.run_id, store=ui_url).asks]  # fmt: skip
    assert said is not None and (said.by, said.authenticated_as) == ("ana", "ui-token:alice")
    assert "answered by <b>ana</b> (ui-token:alice)" in c.get(f"/runs/{run.run_id}").text
    saver.close()


def test_the_public_calls_record_what_a_front_end_checked(ui_url: str) -> None:
    """What the UI calls is the public API: another front end records its own identity."""
    r = savegame.run(wf, {}, store=ui_url)
    decision = savegame.approve(r.run_id, by="ana", authenticated_as="oidc:ana@example.org",
                                store=ui_url, resume=False)  # fmt: skip
    assert decision.entry.metadata["authenticated_as"] == "oidc:ana@example.org"
    app = create_app(ui_url)
    with TestClient(app, base_url=ORIGIN) as c:
        assert "by ana <span" in c.get(f"/runs/{r.run_id}").text

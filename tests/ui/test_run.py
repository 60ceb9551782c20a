"""A run's page, a checkpoint's state, a diff: everything escaped, nothing hidden shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

import savegame
from savegame import END, StepContext, StorageConfig, Workflow
from savegame.codec.crypto import Keyring, new_key
from tests.ui.shop import HOSTILE, flaky, wf


def test_the_run_page_shows_its_timeline_journal_and_tree(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {"order_id": "o1"}, store=ui_url)
    savegame.approve(r.run_id, by="ana", store=ui_url, workflow=wf)
    first = savegame.client.history(r.run_id, store=ui_url)[-1]
    fork = savegame.client.fork(
        first.checkpoint_id, reason="again", by="bo", store=ui_url, workflow=wf, run=False
    )
    html = client().get(f"/runs/{r.run_id}").text
    assert 's-completed">completed' in html
    for h in savegame.client.history(r.run_id, store=ui_url):
        assert f'id="cp-{h.checkpoint_id}"' in html
    assert "waits for " in html and "resumed after the pause" in html  # the approval's pause
    assert "by ana at " in html  # the decision's audit entry
    assert "ch_o1" in html  # the write's result in the journal
    assert f"fork: {fork.run_id}" in html  # the fork, at the checkpoint it left
    assert "fork of step 0 (replay, by bo: again)" in html  # and in the thread's tree


def test_a_hostile_state_renders_as_text(client: Callable[..., TestClient], ui_url: str) -> None:
    r = savegame.run(wf, {"note": HOSTILE, "order_id": HOSTILE}, store=ui_url)
    c = client()
    pages = [
        c.get(f"/runs/{r.run_id}").text,
        c.get(f"/checkpoints/{r.checkpoint_id}").text,
        c.get("/approvals").text,
        c.get(f"/runs?q={r.run_id}").text,
    ]
    for html in pages:
        assert "<script>document" not in html and "<img src=x" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in pages[1]


secretive = Workflow("secretive", secrets={"api_key": "UI_TEST_API_KEY"})


@secretive.step(entry=True)
def keep(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ctx.tag(customer="ada@example.org", team="blue")
    return {
        "api_key": ctx.secret("UI_TEST_API_KEY").reveal(),
        "token": ctx.secret("UI_TEST_API_KEY"),
    }, END


def test_secrets_and_sensitive_metadata_are_never_shown(
    client: Callable[..., TestClient], ui_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UI_TEST_API_KEY", "sk-live-VERY-SECRET")
    storage = StorageConfig(
        keyring=Keyring.parse(f"k1:{new_key()}"), sensitive_metadata={"customer"}
    )
    r = savegame.run(
        secretive, {}, store=ui_url, storage=storage, metadata={"customer": "ada@example.org"}
    )
    c = client(storage=storage)  # the UI has the keys: it could read everything
    pages = [c.get(f"/runs/{r.run_id}").text, c.get(f"/checkpoints/{r.checkpoint_id}").text]
    for html in pages:
        assert "sk-live-VERY-SECRET" not in html and "ada@example.org" not in html
        assert "hidden: sensitive metadata" in html
    assert "Secret(UI_TEST_API_KEY)" in pages[1] and "blue" in pages[1]


def test_an_encrypted_store_without_its_keys_says_so(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    storage = StorageConfig(keyring=Keyring.parse(f"k1:{new_key()}"))
    r = savegame.run(wf, {"note": "the plan"}, store=ui_url, storage=storage)
    c = client(storage=StorageConfig())
    run_page = c.get(f"/runs/{r.run_id}")
    assert run_page.status_code == 200 and "this UI cannot open it" in run_page.text
    state = c.get(f"/checkpoints/{r.checkpoint_id}")
    assert "SAVEGAME_KEYS" in state.text and "the plan" not in state.text
    assert "SAVEGAME_KEYS" in c.get("/approvals").text


def test_a_diff_of_two_checkpoints(client: Callable[..., TestClient], ui_url: str) -> None:
    r = savegame.run(wf, {"amount": 5}, store=ui_url)
    savegame.approve(r.run_id, by="ana", store=ui_url, workflow=wf)
    newest, *_, oldest = savegame.client.history(r.run_id, store=ui_url)
    c = client()
    html = c.get(f"/diff?a={oldest.checkpoint_id}&b={newest.checkpoint_id}").text
    assert "<code>/receipt</code>" in html and "ch_o1" in html and "added" in html
    part = c.get(
        f"/diff?a={oldest.checkpoint_id}&b={newest.checkpoint_id}", headers={"HX-Request": "true"}
    )
    assert part.text.lstrip().startswith('<section class="diff">')
    assert (
        "pick two different"
        in c.get(f"/diff?a={newest.checkpoint_id}&b={newest.checkpoint_id}").text
    )
    assert c.get(f"/diff?a=nope&b={newest.checkpoint_id}").status_code == 404


def test_an_in_doubt_write_is_highlighted_with_its_choices(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    with pytest.raises(savegame.errors.InDoubtEffectError):
        savegame.run(flaky, {}, store=ui_url)
    (stuck,) = savegame.client.list_runs(store=ui_url)
    html = client().get(f"/runs/{stuck.run_id}").text
    assert 's-needs_attention">needs_attention' in html
    assert '<tr class="in-doubt st-pending">' in html and ">in doubt<" in html
    assert f'action="/runs/{stuck.run_id}/resolve"' in html

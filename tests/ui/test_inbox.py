"""The approvals inbox: every run's waiting calls, oldest first, and 304 while nothing changed."""

from __future__ import annotations

from collections.abc import Callable

from starlette.testclient import TestClient

import savegame
from tests.ui.conftest import csrf_of
from tests.ui.shop import wf


def test_the_inbox_lists_oldest_first_and_answers_304_until_it_changes(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    c = client()
    empty = c.get("/approvals")
    assert "Nothing waits for a person" in empty.text
    first = savegame.run(wf, {"order_id": "o1"}, store=ui_url)
    second = savegame.run(wf, {"order_id": "o2"}, store=ui_url)
    page = c.get("/approvals")
    tag = page.headers["etag"]
    assert tag != empty.headers["etag"]
    assert page.text.index(first.run_id) < page.text.index(second.run_id)
    # The list asks again with what it shows: htmx sends this header with each poll.
    assert '"If-None-Match": "\\"' + tag.strip('"') + '\\""' in page.text
    same = c.get("/approvals", headers={"If-None-Match": tag, "HX-Request": "true"})
    assert same.status_code == 304 and same.text == ""
    savegame.approve(first.run_id, by="ana", store=ui_url, workflow=wf)
    moved = c.get("/approvals", headers={"If-None-Match": tag, "HX-Request": "true"})
    assert moved.status_code == 200 and moved.headers["etag"] != tag
    assert moved.text.lstrip().startswith('<div id="inbox"')
    assert first.run_id not in moved.text and second.run_id in moved.text


def test_a_waiting_call_has_one_step_number_wherever_it_shows(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    """The inbox, the run's page, the confirmation page and history number the step the
    run waits at alike: the checkpoint's (history's), not the journal's (one more)."""
    r = savegame.run(wf, {"order_id": "o1"}, store=ui_url)  # plan ran; pay asks
    [head] = savegame.client.history(r.run_id, store=ui_url, limit=1)
    assert (head.step, head.status.value, head.next) == (1, "interrupted", "pay")
    [waiting] = savegame.client.pending_interrupts(r.run_id, store=ui_url)
    assert (waiting.step, waiting.node) == (1, "pay")
    assert waiting.interrupt_id == f"{r.run_id}:2:0:approval"  # the id keeps the journal's

    c = client()
    said = "at step 1 → pay"
    assert said in c.get("/approvals").text
    assert said in c.get(f"/runs/{r.run_id}").text
    form = {"interrupt_id": waiting.interrupt_id, "csrf_token": csrf_of(c)}
    confirm = c.post(f"/runs/{r.run_id}/approve", data=form).text
    assert "interrupted</span>, step 1." in confirm
    for page in (c.get("/approvals").text, c.get(f"/runs/{r.run_id}").text, confirm):
        assert "step 2" not in page

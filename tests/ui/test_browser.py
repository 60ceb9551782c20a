"""The UI in a real browser: Debian's Chromium, driven by Playwright, against a real
``savegame ui`` process (uvicorn) on a real SQLite store.

Skipped where Chromium or Playwright is missing, except where services are required
(``SAVEGAME_REQUIRE_SERVICES=1``, CI): there a missing browser fails the run. CI
installs Debian's ``chromium`` package before the tests (``.ci/run``); Playwright's
own browser downloads are never used.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import RunStatus, open_store
from tests.ui.shop import HOSTILE, asks, wf

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(savegame.__file__).resolve().parents[1]
TOKEN = "browser-test-token-0123456789"

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(url: str, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """``savegame ui`` in its own process, from the repository (where ``tests.ui.shop``
    imports, so decided runs go on in the server like a user's would)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT)])}
    env.pop("SAVEGAME_UI_TOKEN", None)
    cmd = [sys.executable, "-m", "savegame", "ui", "--store", url, "--port", str(port), *extra]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"savegame ui exited: {proc.stdout.read().decode() if proc.stdout else ''}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("savegame ui did not start listening within 30 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(store URL, UI base URL) of one server for the module's tests."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ui') / 'shop.db'}"
    open_store(url).close()
    port = _free_port()
    proc = _serve(url, port)
    yield url, f"http://127.0.0.1:{port}"
    _stop(proc)


def _status(url: str, run_id: str, want: RunStatus) -> RunStatus:
    deadline = time.monotonic() + 20
    status = savegame.client.get_run(run_id, store=url).status
    while status is not want and time.monotonic() < deadline:
        time.sleep(0.05)
        status = savegame.client.get_run(run_id, store=url).status
    return status


def test_list_filter_open_a_run_and_diff_two_checkpoints(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    waiting = savegame.run(wf, {"order_id": "filter-me"}, thread_id="browser-list", store=url)
    done = savegame.run(wf, {"amount": 5}, thread_id="browser-done", store=url)
    savegame.approve(done.run_id, by="ana", store=url, workflow=wf)
    page.goto(f"{base}/runs")
    assert page.locator(f'tr[data-run="{waiting.run_id}"]').is_visible()
    page.select_option("select[name=status]", "completed")  # htmx swaps the table
    page.wait_for_url("**/runs?status=completed**")
    assert page.locator(f'tr[data-run="{done.run_id}"]').is_visible()
    assert page.locator(f'tr[data-run="{waiting.run_id}"]').count() == 0
    page.fill("input[name=thread]", "browser-done")
    page.press("input[name=thread]", "Enter")
    page.wait_for_url("**thread=browser-done**")
    page.click(f"text={done.run_id}")
    page.wait_for_url(f"**/runs/{done.run_id}")
    assert page.locator("h1 .status").inner_text() == "completed"
    assert page.locator("table.timeline tbody tr").count() == len(
        savegame.client.history(done.run_id, store=url)
    )
    page.click("button:has-text('Diff A → B')")
    change = page.locator("#diff table.changes")
    change.wait_for()
    assert "/log" in change.inner_text() and "done" in change.inner_text()
    page.locator("a.state-link").last.click()
    page.locator("#state .tree").last.wait_for()
    assert "ch_o1" in page.locator("#state").inner_text()


def test_approve_a_waiting_run_and_see_it_complete(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    r = savegame.run(
        wf, {"order_id": "o-approve", "amount": 30}, thread_id="browser-approve", store=url
    )
    page.goto(f"{base}/approvals")
    card = page.locator(f'article.decision[data-run="{r.run_id}"]')
    card.locator("summary:has-text('edit the arguments')").click()
    card.locator("textarea[name=edit]").fill('{"order_id": "o-approve", "amount": 25}')
    card.locator("button:has-text('Approve')").click()
    page.wait_for_url(f"**/runs/{r.run_id}/approve")
    page.fill("input[name=by]", "ana")
    page.click("button:has-text('Yes, approve')")
    page.wait_for_url(f"**/runs/{r.run_id}?done=approved")
    assert _status(url, r.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    page.reload()
    assert page.locator("h1 .status").inner_text() == "completed"
    assert "by ana" in page.locator("table.journal").inner_text()
    assert savegame.client.get_checkpoint(r.run_id, store=url).state["receipt"]["amount"] == 25


def test_the_second_decision_knows_who_you_are(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    name = "Zoë Łukasz"
    runs = [
        savegame.run(wf, {"order_id": f"o-who-{n}"}, thread_id=f"browser-who-{n}", store=url)
        for n in range(2)
    ]
    for n, r in enumerate(runs):
        page.goto(f"{base}/approvals")
        page.locator(f'article.decision[data-run="{r.run_id}"] button:has-text("Approve")').click()
        page.wait_for_url(f"**/runs/{r.run_id}/approve")
        if n == 0:
            assert page.input_value("input[name=by]") == ""
            page.fill("input[name=by]", name)
        else:  # remembered from the first: nothing typed
            assert page.input_value("input[name=by]") == name
        page.click("button:has-text('Yes, approve')")
        page.wait_for_url(f"**/runs/{r.run_id}?done=approved")
        assert _status(url, r.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
        assert savegame.client.list_effects(r.run_id, store=url)[0].metadata["by"] == name


def test_answer_an_interrupt_with_a_value_and_see_the_run_go_on(
    page: Any, shop: tuple[str, str]
) -> None:
    url, base = shop
    r = savegame.run(asks, {}, thread_id="browser-answer", store=url)
    page.goto(f"{base}/runs/{r.run_id}")
    card = page.locator(f'article.decision[data-run="{r.run_id}"]')
    assert "which size?" in card.inner_text()
    card.locator("textarea[name=value]").fill("L")  # a bare word: not JSON
    card.locator("button:has-text('Answer')").click()
    page.wait_for_url(f"**/runs/{r.run_id}/supply")
    assert "the value is not JSON" in page.locator("p.error").inner_text()
    assert savegame.client.pending_interrupts(r.run_id, store=url)  # nothing was recorded
    page.goto(f"{base}/runs/{r.run_id}")
    card.locator("textarea[name=value]").fill('{"size": "L", "note": "<b>gift</b>"}')
    card.locator("button:has-text('Answer')").click()
    page.wait_for_url(f"**/runs/{r.run_id}/supply")
    assert "which size?" in page.locator("main").inner_text()
    assert "<b>gift</b>" in page.locator("div.answer").inner_text()  # shown as text
    page.fill("input[name=by]", "ana")
    page.click("button:has-text('Yes, answer')")
    page.wait_for_url(f"**/runs/{r.run_id}?done=answered")
    assert _status(url, r.run_id, RunStatus.COMPLETED) is RunStatus.COMPLETED
    page.reload()
    assert page.locator("h1 .status").inner_text() == "completed"
    assert "by ana" in page.locator("table.journal").inner_text()
    assert savegame.client.get_checkpoint(r.run_id, store=url).state["shipped"] == {
        "size": "L", "note": "<b>gift</b>"
    }  # fmt: skip


def test_reject_then_fork_with_an_edit(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    r = savegame.run(wf, {"order_id": "o-reject"}, thread_id="browser-reject", store=url)
    page.goto(f"{base}/runs/{r.run_id}")
    page.fill("article.decision input[name=reason]", "wrong customer")
    page.click("article.decision button:has-text('Reject')")
    page.fill("input[name=by]", "bo")
    page.click("button:has-text('Yes, reject')")
    page.wait_for_url(f"**/runs/{r.run_id}?done=rejected")
    assert _status(url, r.run_id, RunStatus.FAILED) is RunStatus.FAILED
    planned = next(h for h in savegame.client.history(r.run_id, store=url) if h.node == "plan")
    page.goto(f"{base}/checkpoints/{planned.checkpoint_id}")
    page.click("summary:has-text('Fork from here')")
    page.fill("textarea[name=set]", 'order.id="o-fixed"')
    page.fill("input[name=reason]", "right customer")
    page.click("button:has-text('Fork…')")
    page.fill("input[name=by]", "bo")
    page.click("button:has-text('Yes, fork')")
    page.wait_for_url("**?done=forked")
    forked = page.url.split("/runs/")[1].split("?")[0]
    assert savegame.client.get_checkpoint(forked, store=url).state["order"]["id"] == "o-fixed"
    assert "fork of step" in page.locator("ul.forktree").inner_text()


def test_the_inbox_shows_a_new_run_without_a_reload(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    page.goto(f"{base}/approvals")
    r = savegame.run(wf, {"order_id": "o-live"}, thread_id="browser-live", store=url)
    page.locator(f'article.decision[data-run="{r.run_id}"]').wait_for(timeout=15_000)


def test_a_hostile_state_stays_text(page: Any, shop: tuple[str, str]) -> None:
    url, base = shop
    r = savegame.run(wf, {"note": HOSTILE}, thread_id="browser-xss", store=url)
    page.goto(f"{base}/checkpoints/{r.checkpoint_id}")
    assert HOSTILE in page.locator(".state").inner_text()
    page.goto(f"{base}/runs/{r.run_id}")
    page.locator("a.state-link").last.click()
    page.locator("#state .tree").last.wait_for()
    assert HOSTILE in page.locator("#state").inner_text()
    assert page.title() != "pwned" and page.dialogs == []
    assert page.locator("#state script, #state img").count() == 0


def test_a_token_guards_every_page_and_an_open_host_needs_one(
    page: Any, shop: tuple[str, str]
) -> None:
    url, _ = shop
    port = _free_port()
    proc = _serve(url, port, "--token", TOKEN)
    try:
        refused = page.goto(f"http://127.0.0.1:{port}/runs")
        assert refused.status == 401 and "needs its token" in page.content()
        page.goto(f"http://127.0.0.1:{port}/?token={TOKEN}")
        page.wait_for_url("**/runs")
        assert page.locator("h1").inner_text() == "Runs"
    finally:
        _stop(proc)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("SAVEGAME_UI_TOKEN", None)
    open_host = subprocess.run(
        [sys.executable, "-m", "savegame", "ui", "--store", url, "--host", "0.0.0.0", "--port", str(port)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert open_host.returncode != 0 and "give it a token" in open_host.stderr + open_host.stdout

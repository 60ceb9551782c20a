"""Read-only mode and a viewer's token in a real browser: Debian's Chromium through
Playwright against a real ``savegame ui`` process (see ``test_browser.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import open_store
from tests.ui.shop import wf
from tests.ui.test_browser import _free_port, _serve, _stop

pytestmark = pytest.mark.browser

BOB = "bob-viewer-secret-456789"
ALICE = "alice-approver-secret-0123"


def _no_action_anywhere(page: Any, base: str, run: savegame.RunResult) -> None:
    """Every page that offers an action to an approver, shown without one."""
    page.goto(f"{base}/approvals")
    card = page.locator(f'article.decision[data-run="{run.run_id}"]')
    card.wait_for()
    assert "charge" in card.inner_text()  # what it waits for is shown ...
    assert card.locator("button, form, textarea").count() == 0  # ... and nothing to press
    page.goto(f"{base}/runs/{run.run_id}")
    assert page.locator("article.decision").count() == 1
    assert page.locator("form[method=post], button:has-text('Cancel')").count() == 0
    page.goto(f"{base}/checkpoints/{run.checkpoint_id}")
    page.locator(".state .tree").first.wait_for()
    assert page.locator("text=Fork from here").count() == 0
    assert page.locator("form[method=post]").count() == 0


def test_a_read_only_ui_shows_runs_and_no_button(page: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    open_store(url).close()
    r = savegame.run(wf, {"order_id": "o-ro"}, thread_id="browser-ro", store=url)
    port = _free_port()
    proc = _serve(url, port, "--read-only")
    base = f"http://127.0.0.1:{port}"
    try:
        page.goto(f"{base}/runs")
        assert page.locator("header.top .access").inner_text() == "read-only"
        assert page.locator(f'tr[data-run="{r.run_id}"]').is_visible()
        _no_action_anywhere(page, base, r)
        # a POST made by hand (the page's own cookies and CSRF token) is refused too
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "sg_csrf")
        refused = page.request.post(f"{base}/runs/{r.run_id}/cancel",
                                    form={"csrf_token": csrf, "confirmed": "1", "by": "m"})  # fmt: skip
        assert refused.status == 403 and "read-only" in refused.text()
    finally:
        _stop(proc)
    assert savegame.client.get_run(r.run_id, store=url).status is savegame.RunStatus.INTERRUPTED


def test_a_viewers_token_from_a_file_logs_in_reads_and_cannot_act(
    page: Any, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'viewer.db'}"
    open_store(url).close()
    r = savegame.run(wf, {"order_id": "o-view"}, thread_id="browser-view", store=url)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"bob:viewer={BOB}\nalice:approver={ALICE}\n")
    port = _free_port()
    proc = _serve(url, port, "--token-file", str(tokens))
    base = f"http://127.0.0.1:{port}"
    try:
        assert page.goto(f"{base}/runs").status == 401
        page.goto(f"{base}/?token={BOB}")
        page.wait_for_url("**/runs")
        assert page.locator("header.top .access").inner_text() == "bob · viewer"
        _no_action_anywhere(page, base, r)
        page.goto(f"{base}/?token={ALICE}")  # the approver's link: the buttons are back
        page.goto(f"{base}/runs/{r.run_id}")
        assert page.locator("header.top .access").inner_text() == "alice · approver"
        assert page.locator("article.decision button:has-text('Approve')").is_visible()
    finally:
        proc.terminate()
        banner = proc.communicate(timeout=30)[0].decode()
    assert "bob (viewer), alice (approver)" in banner, banner
    assert BOB not in banner and ALICE not in banner  # names are printed, secrets never

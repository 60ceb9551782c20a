"""Who may talk to the UI: loopback by default, a token elsewhere, its own Host, CSRF."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

import savegame
from savegame.cli import app
from savegame.errors import ConfigurationError
from savegame.ui import serve
from savegame.ui._guard import check_bind, is_loopback
from savegame.ui._tokens import parse_token
from tests.ui.conftest import csrf_of
from tests.ui.shop import wf

TOKEN = "a-token-of-twenty-chars"


def test_only_loopback_serves_without_a_token() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        check_bind(host, ())
    for host in ("0.0.0.0", "::", "192.0.2.7", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(ConfigurationError, match="give it a token"):
            check_bind(host, ())
        check_bind(host, (parse_token(TOKEN),))
    with pytest.raises(ConfigurationError, match="at least 16"):
        parse_token("short")


def test_serve_and_the_command_refuse_an_open_host_without_a_token(
    ui_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAVEGAME_UI_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match="reachable from other machines"):
        serve(ui_url, host="0.0.0.0")
    result = CliRunner().invoke(app, ["ui", "--store", ui_url, "--host", "0.0.0.0"])
    assert result.exit_code != 0
    assert "give it a token" in result.output and "Traceback" not in result.output


def test_a_page_for_another_host_name_is_refused(client: Callable[..., TestClient]) -> None:
    c = client()
    assert c.get("/runs").status_code == 200
    assert c.get("/runs", headers={"host": "localhost:8765"}).status_code == 200
    rebound = c.get("/runs", headers={"host": "attacker.example:8765"})
    assert rebound.status_code == 400 and "runs" not in rebound.text.lower()


def test_with_a_token_nothing_shows_until_it_is_given(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    savegame.run(wf, {}, store=ui_url)
    c = client(token=TOKEN)
    for path in ("/runs", "/approvals", "/static/ui.css"):
        refused = c.get(path)
        assert refused.status_code == 401 and "shop" not in refused.text
    assert c.get("/runs?token=wrong-token-of-length").status_code == 401
    login = c.get("/runs?status=interrupted&token=" + TOKEN, follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/runs?status=interrupted"
    assert TOKEN not in login.headers["set-cookie"]  # the cookie holds a digest
    assert "shop" in c.get("/runs").text
    other = client(token=TOKEN)
    assert other.get("/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert other.get("/runs", headers={"authorization": "Bearer nope"}).status_code == 401


def test_a_post_without_the_pages_csrf_token_is_refused(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(wf, {}, store=ui_url)
    c = client()
    form = {"interrupt_id": r.interrupt_id or "", "confirmed": "1", "by": "mallory"}
    assert c.post(f"/runs/{r.run_id}/approve", data=form).status_code == 403
    token = csrf_of(c)
    wrong = c.post(f"/runs/{r.run_id}/approve", data={**form, "csrf_token": token[:-1] + "x"})
    assert wrong.status_code == 403
    foreign = c.post(
        f"/runs/{r.run_id}/approve",
        data={**form, "csrf_token": token},
        headers={"origin": "http://attacker.example"},
    )
    assert foreign.status_code == 403
    fresh = TestClient(c.app, base_url="http://127.0.0.1:8765")  # a browser without the cookie
    assert (
        fresh.post(f"/runs/{r.run_id}/approve", data={**form, "csrf_token": token}).status_code
        == 403
    )
    assert savegame.client.pending_interrupts(r.run_id, store=ui_url)  # nothing was decided


def test_every_answer_forbids_inline_scripts_and_framing(client: Callable[..., TestClient]) -> None:
    c = client()
    for path in ("/runs", "/approvals", "/runs/nope", "/static/ui.css"):
        headers = c.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"

"""Every run has its page in the UI, whatever its id, and a link never leads to another
run (issue 30, point 9).

Run and thread ids are the user's (``run(..., run_id=...)``, a LangGraph thread id) and
may hold ``/``, ``?``, ``#`` or ``%``. Links quoted them as Jinja's ``urlencode`` does,
which keeps ``/``: run ``x/../victim`` linked to ``/runs/x/../victim``, which a browser
reads as ``/runs/victim``, and run ``tenant/42`` had no page (its path did not match the
route). Here a real ``savegame ui`` (uvicorn, which decodes a path once, as it should)
is read through httpx (which resolves ``..`` as a browser does), and each page is
reached the way a person reaches it: by following the link another page shows.
"""

from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import savegame
from savegame import END, Workflow, tool

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(savegame.__file__).resolve().parents[1]
TOKEN = "a-token-of-twenty-chars"

IDS = [
    "victim",
    "x/../victim",  # was read as victim
    "tenant/42",  # had no page
    "tenant/42/cancel",  # ends like an action's path
    "what?is=this",
    "hash#tag",
    "per%2Fcent",  # an escape of its own
    "dot/.",
]


@tool(effect="write", idempotent=True, approval=True)
def charge_by_id(amount: int, *, request_id: str) -> dict[str, Any]:
    return {"amount": amount}


wf = Workflow("hostile_ids")


@wf.step(entry=True)
def pay(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], Any]:
    return {"receipt": ctx.call(charge_by_id, amount=state["amount"])}, END


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('ids') / 'ids.db'}"
    for amount, run_id in enumerate(IDS):
        savegame.run(wf, {"amount": amount}, run_id=run_id, thread_id=run_id, store=url)
    return url


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[httpx.Client]:
    with _served(url) as base, httpx.Client(base_url=base, follow_redirects=True) as c:
        yield c


class _served:
    """``savegame ui`` over ``url`` in a process of its own, for the ``with`` block."""

    def __init__(self, url: str, *extra: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        env.pop("SAVEGAME_UI_TOKEN", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "savegame", "ui", "--store", url, "--port", str(self.port),
             "--no-continue", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def __enter__(self) -> str:
        deadline = time.monotonic() + 60  # it prints its address before it listens
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return f"http://127.0.0.1:{self.port}"
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise AssertionError(f"savegame ui did not listen (exit {self.proc.returncode})")

    def __exit__(self, *_: object) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _links(page: str, prefix: str) -> dict[str, str]:
    """Link text -> href, for the links whose href starts with ``prefix``."""
    found = re.findall(rf'<a[^>]*href="({re.escape(prefix)}[^"]*)"[^>]*>([^<]*)</a>', page)
    return {html.unescape(text): html.unescape(href) for href, text in found}


def _one(pattern: str, page: str) -> str:
    (found,) = re.findall(pattern, page)
    return html.unescape(found)


def _run_shown(page: str) -> str:
    """The run a run page is about: the id in its heading."""
    return html.unescape(_one(r'<h1>Run <span class="id">([^<]*)</span>', page))


def _run_page(client: httpx.Client, run_id: str) -> str:
    """The run's page, reached by its link on the runs page."""
    return client.get(_links(client.get("/runs").text, "/runs/")[run_id]).text


def test_every_run_page_is_reached_by_its_link_and_shows_that_run(client: httpx.Client) -> None:
    links = _links(client.get("/runs").text, "/runs/")
    assert sorted(links) == sorted(IDS)
    for run_id, href in links.items():
        page = client.get(href)
        assert page.status_code == 200, (run_id, href, page.text[:300])
        assert _run_shown(page.text) == run_id, href


def test_a_runs_thread_link_lists_that_run(client: httpx.Client) -> None:
    for run_id in IDS:
        thread = _one(r'<dt>Thread</dt><dd class="id"><a href="([^"]*)"', _run_page(client, run_id))
        assert list(_links(client.get(thread).text, "/runs/")) == [run_id]


def test_an_action_on_a_run_acts_on_that_run_and_leads_back_to_it(
    client: httpx.Client, url: str
) -> None:
    for run_id in IDS:
        cancel = _one(r'<form method="post" action="([^"]*/cancel)"', _run_page(client, run_id))
        form = {"csrf_token": client.cookies["sg_csrf"], "by": "ana"}
        confirm = client.post(cancel, data=form)
        assert confirm.status_code == 200, (run_id, cancel, confirm.text[:300])
        assert _one(r'<p>Run <a class="id" href="[^"]*">([^<]*)</a>', confirm.text) == run_id
        done = client.post(cancel, data={**form, "confirmed": "1"}, follow_redirects=False)
        assert done.status_code == 303, (run_id, done.text[:300])
        assert _run_shown(client.get(done.headers["location"]).text) == run_id
        assert savegame.client.get_run(run_id, store=url).status.value == "cancelled"


def test_a_checkpoint_page_links_to_its_run(client: httpx.Client) -> None:
    for run_id in IDS:
        state = re.findall(r'<a class="state-link" href="([^"]*)"', _run_page(client, run_id))[0]
        page = client.get(state).text
        back = _links(page, "/runs/")
        assert list(back) == [run_id]
        assert _run_shown(client.get(back[run_id]).text) == run_id


def test_the_token_login_keeps_the_run_it_was_asked_for(url: str) -> None:
    with (
        _served(url, "--token", TOKEN) as base,
        httpx.Client(base_url=base, follow_redirects=True) as c,
    ):
        href = _links(c.get(f"/runs?token={TOKEN}").text, "/runs/")["x/../victim"]
        fresh = httpx.Client(
            base_url=base, follow_redirects=True
        )  # a browser that has not logged in yet
        login = fresh.get(f"{href}?token={TOKEN}")
        assert login.history and login.history[0].status_code == 303
        assert _run_shown(login.text) == "x/../victim"
        fresh.close()

"""The runs page: filters, keyset pages, the htmx fragment, bad filters said on the page."""

from __future__ import annotations

import re
from collections.abc import Callable

from starlette.testclient import TestClient

import savegame
from tests.runtime.version_flows import V1
from tests.ui.shop import wf

ROW = re.compile(r'<tr data-run="([^"]+)">')


def _ids(html: str) -> list[str]:
    return ROW.findall(html)


def test_the_list_filters_and_pages_through_every_run_once(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    started = [
        savegame.run(wf, {"order_id": f"o{n}"}, thread_id=f"shop-{n}", store=ui_url).run_id
        for n in range(7)
    ]
    savegame.approve(started[2], by="ana", store=ui_url, workflow=wf)  # completes it
    c = client()
    page = c.get("/runs?limit=3")
    assert _ids(page.text) == started[::-1][:3]
    seen: list[str] = []
    url: str | None = "/runs?limit=3"
    while url:
        html = c.get(url).text
        seen += _ids(html)
        found = re.search(r'class="older" href="([^"]+)"', html)
        url = found.group(1).replace("&amp;", "&") if found else None
    assert seen == started[::-1]
    assert _ids(c.get("/runs?status=completed").text) == [started[2]]
    assert _ids(c.get("/runs?thread=shop-4").text) == [started[4]]
    assert _ids(c.get(f"/runs?q={started[5][-8:].lower()}").text) == [started[5]]
    assert _ids(c.get("/runs?workflow=shop&status=interrupted&limit=2").text) == [
        started[6],
        started[5],
    ]
    assert "No runs match these filters" in c.get("/runs?workflow=nope").text
    # Each row shows the head checkpoint's usage: the completed run made one tool call.
    row = c.get("/runs?status=completed").text
    assert "0 llm · 1 tool" in row


def test_htmx_gets_the_table_alone_and_a_bad_filter_is_said(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    savegame.run(wf, {}, store=ui_url)
    c = client()
    part = c.get("/runs", headers={"HX-Request": "true"})
    assert part.text.lstrip().startswith("<table") and "<html" not in part.text
    full = c.get("/runs", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in full.text
    bad = c.get("/runs?status=sleeping")
    assert bad.status_code == 400 and "unknown status &#39;sleeping&#39;" in bad.text
    assert c.get("/runs?limit=0").status_code == 400
    gone = c.get("/runs?before=no-such-run")
    assert gone.status_code == 404 and "no-such-run" in gone.text


def test_a_run_that_called_an_unpriced_model_costs_unknown_not_nothing(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    priced = savegame.ScriptedModel(
        [savegame.agent.ModelResponse("ok", input_tokens=5, cost_usd=0.0012)]
    )
    unpriced = savegame.ScriptedModel(
        [savegame.agent.ModelResponse("ok", input_tokens=5, cost_usd=None)]
    )
    known = savegame.run(savegame.Agent("priced", priced), {"input": "hi"}, store=ui_url)
    unknown = savegame.run(savegame.Agent("unpriced", unpriced), {"input": "hi"}, store=ui_url)
    c = client()
    rows = dict(re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', c.get("/runs").text, re.S))
    assert "$0.0012" in rows[known.run_id] and "unknown" not in rows[known.run_id]
    assert "unknown" in rows[unknown.run_id] and "$" not in rows[unknown.run_id]
    assert "cost unknown" in c.get(f"/runs/{unknown.run_id}").text


def test_a_run_s_version_shows_and_a_queued_one_says_what_it_waits_for(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    ran = savegame.run(V1, store=ui_url).run_id
    queued = savegame.submit(V1, store=ui_url).run_id
    c = client()
    listed = c.get("/runs").text
    assert listed.count('<span class="dim version">v1</span>') == 2
    assert listed.count("waiting for a worker of version v1") == 1  # the queued one only
    page = c.get(f"/runs/{queued}").text
    assert "<dt>Version</dt><dd><code>v1</code>" in page
    assert "waiting for a worker of version v1" in page
    assert "waiting for a worker" not in c.get(f"/runs/{ran}").text

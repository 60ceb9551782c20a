"""LangGraph threads in the UI (through Starlette's test client, over a real SQLite file):
the runs page, a run's page, a checkpoint, a diff and the inbox read them as LangGraph
sees them, and an ``interrupt()`` is answered from the inbox; the graph then continues
with that answer. The browser drives the same pages in ``test_browser_langgraph.py``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from starlette.testclient import TestClient

import savegame
from savegame.codec import _registry
from savegame.langgraph import SavegameSaver
from tests.integrations.langgraph import migrate_graphs
from tests.integrations.langgraph.graphs import PARCEL, Parcel, parcel_graph
from tests.integrations.langgraph.test_saver import chat_graph, conf
from tests.ui.conftest import csrf_of


def statuses(html: str) -> list[str]:
    return re.findall(r'<span class="status s-(\w+)">', html)


def answer(c: TestClient, run_id: str, interrupt_id: str, value: str, by: str) -> Any:
    """The inbox's form, then the confirmation's."""
    form = {"interrupt_id": interrupt_id, "value": value, "csrf_token": csrf_of(c)}
    asked = c.post(f"/runs/{run_id}/supply", data=form)
    assert asked.status_code == 200 and "Confirm: answer" in asked.text, asked.text
    assert "returns to the node" in asked.text
    return c.post(
        f"/runs/{run_id}/supply", data={**form, "confirmed": "1", "by": by}, follow_redirects=False
    )


def test_a_waiting_thread_is_shown_and_answered_from_the_inbox(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    saver = SavegameSaver(ui_url)
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    asked = graph.get_state(conf("t1")).interrupts[0]
    (run,) = savegame.client.list_runs(store=ui_url)
    c = client()

    listed = c.get("/runs")
    assert listed.status_code == 200
    assert statuses(listed.text) == ["interrupted"] and "langgraph <span" in listed.text
    assert run.run_id in c.get("/runs?status=interrupted").text
    assert run.run_id not in c.get("/runs?status=completed").text

    page = c.get(f"/runs/{run.run_id}")
    assert page.status_code == 200
    assert statuses(page.text)[0] == "interrupted" and "Waiting for a person" in page.text
    assert "send it?" in page.text and "reply 1" in page.text  # the question, the channels
    inbox = c.get("/approvals")
    assert f'data-interrupt="{asked.id}"' in inbox.text and f'data-run="{run.run_id}"' in inbox.text

    done = answer(c, run.run_id, asked.id, '"yes"', "alice")
    assert done.headers["location"] == f"/runs/{run.run_id}?done=answered"
    page = c.get(done.headers["location"])
    assert statuses(page.text)[0] == "queued"
    assert "graph.invoke(None" in page.text and "answered by <b>alice</b>" in page.text
    assert "Nothing waits for a person" in c.get("/approvals").text
    form = {"interrupt_id": asked.id, "value": '"no"', "csrf_token": csrf_of(c), "by": "bob"}
    for confirmed in ("0", "1"):  # refused before anything is shown, and when confirmed
        again = c.post(f"/runs/{run.run_id}/supply", data={**form, "confirmed": confirmed})
        assert again.status_code == 400
        assert f"interrupt {asked.id} was answered already, by alice at" in again.text

    out = graph.invoke(None, conf("t1"))
    assert [m.content for m in out["messages"]][-1] == "said yes"
    assert statuses(c.get("/runs").text) == ["completed"]
    saver.close()


def test_every_page_of_a_migrated_store_reads_and_bookkeeping_is_not_listed(
    client: Callable[..., TestClient], tmp_path: Path
) -> None:
    source = tmp_path / "langgraph.db"
    migrate_graphs.sqlite_source(source)
    url = f"sqlite:///{tmp_path / 'target.db'}"
    savegame.integrations.langgraph.migrate(str(source), url)
    c = TestClient(savegame.ui.create_app(url), base_url="http://127.0.0.1:8765")
    listed = c.get("/runs").text
    assert "lgmigration" not in listed and "langgraph-migration" not in listed
    for run in savegame.client.list_runs(store=url, workflow="langgraph"):
        page = c.get(f"/runs/{run.run_id}")
        assert page.status_code == 200, page.text
        ids = re.findall(r'name="a" value="([^"]+)"', page.text)
        state = c.get(f"/checkpoints/{ids[-1]}")
        assert state.status_code == 200 and "LangGraph checkpoint" in state.text
        diff = c.get(f"/diff?a={ids[0]}&b={ids[-1]}")
        assert diff.status_code == 200 and "Channels from LangGraph step" in diff.text
    marker = savegame.client.list_runs(workflow="langgraph-migration", store=url)[0]
    assert c.get(f"/runs/{marker.run_id}").status_code == 200  # still there by id
    inbox = c.get("/approvals").text
    assert inbox.count('class="decision"') == 2 and "approve &gt; ask" in inbox
    c.close()


def test_a_type_the_ui_does_not_have_shows_as_its_name(
    client: Callable[..., TestClient], ui_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI's process need not import the graph's classes: a page shows them by name."""
    saver = SavegameSaver(ui_url)
    parcel_graph().compile(checkpointer=saver).invoke({"parcel": Parcel(1)}, conf("p1"))
    saver.close()
    monkeypatch.delitem(_registry._by_name, PARCEL)  # as in a process without it
    (run,) = savegame.client.list_runs(store=ui_url)
    c = client()
    page = c.get(f"/runs/{run.run_id}")
    assert page.status_code == 200, page.text
    assert PARCEL in page.text and "weight" in page.text
    assert statuses(page.text)[0] == "completed"
    ids = re.findall(r'href="/checkpoints/([^"]+)"', page.text)
    assert all(c.get(f"/checkpoints/{i}").status_code == 200 for i in ids)

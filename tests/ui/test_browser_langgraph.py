"""LangGraph threads in a real browser: Debian's Chromium, driven by Playwright, against a
real ``savegame ui`` process on a store SavegameSaver wrote and on one ``savegame migrate
langgraph`` filled. The server's process imports no graph: it reads the threads with
savegame's readers alone. A person answers the ``interrupt()`` in the page; the graph,
run here as the application would, continues with that answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage

import savegame
from savegame.integrations import langgraph
from savegame.langgraph import SavegameSaver
from tests.integrations.langgraph import migrate_graphs
from tests.integrations.langgraph.test_saver import chat_graph, conf
from tests.ui.test_browser import _free_port, _serve, _stop

pytestmark = pytest.mark.browser


def serving(url: str) -> Iterator[str]:
    port = _free_port()
    proc = _serve(url, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture
def native(tmp_path: Path) -> Iterator[tuple[str, str, Any]]:
    """(store URL, UI base URL, the graph) with thread t1 waiting at ``interrupt()``."""
    url = f"sqlite:///{tmp_path / 'native.db'}"
    saver = SavegameSaver(url)
    graph = chat_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    yield from ((url, base, graph) for base in serving(url))
    saver.close()


@pytest.fixture
def migrated(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(store URL, UI base URL) of a store migrated from LangGraph's SqliteSaver."""
    source = tmp_path / "langgraph.db"
    migrate_graphs.sqlite_source(source)
    url = f"sqlite:///{tmp_path / 'migrated.db'}"
    langgraph.migrate(str(source), url)
    yield from ((url, base) for base in serving(url))


def answer_in(page: Any, card: Any, value: str, by: str) -> None:
    """Fill the card's answer, then confirm it as ``by``."""
    card.locator("textarea[name=value]").fill(value)
    card.locator("button:has-text('Answer')").click()
    page.wait_for_url("**/supply")
    assert "returns to the node" in page.locator("main").inner_text()
    page.fill("input[name=by]", by)
    page.click("button:has-text('Yes, answer')")


def test_a_native_thread_is_listed_waiting_and_answered_from_the_inbox(
    page: Any, native: tuple[str, str, Any]
) -> None:
    url, base, graph = native
    asked = graph.get_state(conf("t1")).interrupts[0]
    (run,) = savegame.client.list_runs(store=url)
    page.goto(f"{base}/runs")
    row = page.locator(f'tr[data-run="{run.run_id}"]')
    assert "interrupted" in row.inner_text() and "(root)" in row.inner_text()
    page.select_option("select[name=status]", "interrupted")
    page.wait_for_url("**/runs?status=interrupted**")
    page.locator(f'tr[data-run="{run.run_id}"]').wait_for()
    page.click(f"text={run.run_id}")
    page.wait_for_url(f"**/runs/{run.run_id}")
    assert page.locator("h1 .status").inner_text() == "interrupted"
    assert "LangGraph thread t1" in page.locator("h1").inner_text()
    page.locator("a.state-link").last.click()
    page.locator("#state h3").wait_for()
    assert "LangGraph checkpoint" in page.locator("#state").inner_text()

    page.click("nav >> text=Approvals")
    card = page.locator(f'article.decision[data-interrupt="{asked.id}"]')
    assert "send it?" in card.inner_text()
    answer_in(page, card, '"yes"', "alice")
    page.wait_for_url(f"**/runs/{run.run_id}?done=answered")
    assert page.locator("h1 .status").inner_text() == "queued"
    assert "graph.invoke(None" in page.locator("p.notice").inner_text()
    assert "answered by alice" in page.locator("section.answered").inner_text()
    page.goto(f"{base}/approvals")
    assert "Nothing waits for a person" in page.locator("#inbox").inner_text()

    out = graph.invoke(None, conf("t1"))  # the application continues: the node gets "yes"
    assert out["approved"] is True and out["messages"][-1].content == "said yes"
    page.goto(f"{base}/runs")
    assert "completed" in page.locator(f'tr[data-run="{run.run_id}"]').inner_text()


def test_a_migrated_thread_reads_and_its_subgraphs_interrupt_is_answered_on_its_page(
    page: Any, migrated: tuple[str, str]
) -> None:
    url, base = migrated
    page.goto(f"{base}/runs")
    listed = page.locator("table.runs tbody").inner_text()
    assert "lgmigration" not in listed and "langgraph-migration" not in listed
    root = next(
        r
        for r in langgraph.shown_runs(thread_id="waiting", store=url)
        if r.head and r.head.line.root
    )
    page.goto(f"{base}/runs/{root.info.run_id}")
    assert page.locator("h1 .status").inner_text() == "interrupted"
    assert "subgraph approve" in page.locator("dl.facts").inner_text()
    card = page.locator("section.waiting article.decision")
    assert "approve > ask" in card.inner_text() and "send it?" in card.inner_text()
    page.click("button:has-text('Diff A → B')")
    page.locator("#diff h3").wait_for()
    assert "Channels from LangGraph step" in page.locator("#diff").inner_text()

    answer_in(page, card, '"yes"', "carol")
    page.wait_for_url(f"**/runs/{root.info.run_id}?done=answered")
    assert page.locator("h1 .status").inner_text() == "queued"

    saver = SavegameSaver(url)
    try:
        out = migrate_graphs.graph().compile(checkpointer=saver).invoke(None, conf("waiting"))
    finally:
        saver.close()
    assert out["approved"] is True and out["messages"][-1].content == "said yes"
    page.reload()
    assert page.locator("h1 .status").inner_text() == "completed"

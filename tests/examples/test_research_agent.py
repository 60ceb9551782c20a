"""examples/research_agent.py: web-style tools against a local encyclopedia server, and
a summarising context: the model's last prompt holds the pinned question, a summary
and the last turns, while the run's state keeps every page read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from tests.provider import CHAT, FakeProvider, chat

from .conftest import example

QUESTION = "When was the first transatlantic telegraph cable laid?"
PAGES = {
    "Transatlantic_telegraph_cable": "The first cable was completed on 5 August 1858.",
    "Cyrus_West_Field": "Cyrus West Field led the Atlantic Telegraph Company.",
}


@pytest.fixture
def web() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1")
    server.start()
    server.expect_request("/w/rest.php/v1/search/page").respond_with_json(
        {
            "pages": [
                {"id": n, "key": key, "title": key.replace("_", " "), "excerpt": text[:20]}
                for n, (key, text) in enumerate(PAGES.items())
            ]
        }
    )
    for key, text in PAGES.items():
        server.expect_request(f"/w/rest.php/v1/page/{key}").respond_with_json(
            {"key": key, "title": key.replace("_", " "), "source": text}
        )
    try:
        yield server
    finally:
        server.clear()
        server.stop()


def test_research_reads_pages_and_keeps_its_prompt_small(
    fake: FakeProvider, web: HTTPServer, tmp_path: Path
) -> None:
    fake.script(
        CHAT,
        chat(None, [("search", {"query": "first transatlantic telegraph cable"})]),
        chat(None, [("read_page", {"key": "Transatlantic_telegraph_cable"})]),
        chat(None, [("read_page", {"key": "Cyrus_West_Field"})]),
        chat("The user asked about the 1858 cable; a search found two pages."),  # the summary
        chat("On 5 August 1858 (Transatlantic telegraph cable; Cyrus West Field)."),
    )
    out = example(
        "research_agent",
        "--keep",
        "2",
        "--web-url",
        web.url_for("").rstrip("/"),
        QUESTION,
        fake=fake,
        cwd=tmp_path,
    )
    assert "answer: On 5 August 1858" in out
    assert "state: 9 messages; largest prompt: 8 messages" in out

    # The tools went to the web server: one search, each page read once.
    paths = [request.path for request, _ in web.log]
    assert paths == [
        "/w/rest.php/v1/search/page",
        "/w/rest.php/v1/page/Transatlantic_telegraph_cable",
        "/w/rest.php/v1/page/Cyrus_West_Field",
    ]
    assert web.log[0][0].args["q"] == "first transatlantic telegraph cable"

    bodies = fake.bodies(CHAT)
    assert len(bodies) == 5
    summary = bodies[3]["messages"]
    assert f"user: {QUESTION}" in summary[1]["content"]
    assert "tool search returned:" in summary[1]["content"]
    assert "5 August 1858" not in summary[1]["content"]  # that turn is still in the window
    last = bodies[4]["messages"]
    assert [m["role"] for m in last] == [
        "system",
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last[1]["content"] == f"Key facts:\n- research question: {QUESTION}"
    assert last[2]["content"].endswith("a search found two pages.")
    # The window starts at a tool call: the question that asked for it leads it.
    assert last[3] == {"role": "user", "content": QUESTION}
    assert json.loads(last[5]["content"])["text"] == PAGES["Transatlantic_telegraph_cable"]

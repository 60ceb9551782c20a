"""A research agent: it searches an encyclopedia, reads pages, and answers with sources,
its prompt kept small by a summarising context while its state keeps every page read.

    python examples/research_agent.py "When was the first transatlantic telegraph cable laid?"
    python examples/research_agent.py --keep 4 "..."        # a smaller window
    python examples/research_agent.py --web-url http://localhost:8080 "..."

The tools speak Wikipedia's REST API (``/w/rest.php/v1/search/page`` and
``/w/rest.php/v1/page/<key>``) at ``--web-url`` (default https://en.wikipedia.org; the
test serves the same shape locally). Each call is journaled: a crash, a resume or a fork
never fetches a page twice. ``KeepLast(keep, summarise=model, pinned=...)`` sends the
model the system prompt, the research question (pinned, so it never falls out), a
summary of older turns and the last ``keep`` turns; the summary is itself a journaled
model call, made once per ``keep`` turns that leave the window.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import httpx
from _common import model, parser, report

from savegame import Agent, run, tool
from savegame.agent import KeepLast
from savegame.client import model_calls

SYSTEM = (
    "You research questions with an encyclopedia. Search, read the most relevant pages, "
    "then answer in a few sentences naming the pages you used."
)
PAGE_CHARS = 3000
"""Characters of a page a tool result holds: what a model needs, not the whole article."""


def web_url() -> str:
    return os.environ.get("RESEARCH_WEB_URL", "https://en.wikipedia.org").rstrip("/")


def get(path: str, **params: Any) -> Any:
    headers = {"User-Agent": "savegame-research-example/0.1"}
    response = httpx.get(web_url() + path, params=params, headers=headers, timeout=30)
    response.raise_for_status()
    return response.json()


@tool(effect="read", retries=2)
def search(query: str) -> list[dict[str, Any]]:
    """Search the encyclopedia; each hit's key is what read_page takes."""
    found = get("/w/rest.php/v1/search/page", q=query, limit=5)
    return [
        {"key": p["key"], "title": p["title"], "excerpt": p.get("excerpt") or ""}
        for p in found.get("pages") or ()
    ]


@tool(effect="read", retries=2)
def read_page(key: str) -> dict[str, Any]:
    """Read an encyclopedia page by its key (from search)."""
    page = get(f"/w/rest.php/v1/page/{httpx.URL(key).path}")
    return {"title": page["title"], "text": (page.get("source") or "")[:PAGE_CHARS]}


def main(argv: list[str]) -> int:
    parse = parser("A research agent with web tools and a summarising context.")
    parse.add_argument("question")
    parse.add_argument("--keep", type=int, default=6, help="turns sent as they are")
    parse.add_argument("--web-url", default=None, help="the encyclopedia's root URL")
    args = parse.parse_args(argv)
    if args.web_url:
        os.environ["RESEARCH_WEB_URL"] = args.web_url

    llm = model(args)
    context = KeepLast(
        args.keep, summarise=llm, pinned=lambda state: [f"research question: {state['question']}"]
    )
    agent = Agent("research", llm, [search, read_page], system=SYSTEM, context=context)
    result = run(agent, {"input": args.question, "question": args.question}, store=args.store)
    report(result, args.store, "examples/research_agent.py")
    sizes = [
        len(c.request.messages) for c in model_calls(result.run_id, store=args.store) if c.request
    ]
    print(f"state: {len(result.state['messages'])} messages; largest prompt: {max(sizes)} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

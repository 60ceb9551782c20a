"""The approvals inbox: what every run waits for from a person, oldest first, live;
a LangGraph thread's unanswered ``interrupt()`` among them (``langgraph.waiting``).

The list polls itself (htmx, every few seconds) with ``If-None-Match`` set to the
ETag of what it shows; the server answers ``304 Not Modified`` while nothing
changed, so an open inbox costs one small read of the journal's pending entries
per poll and repaints only when a run arrives or leaves.
"""

from __future__ import annotations

import hashlib

from starlette.requests import Request
from starlette.responses import Response

from savegame.effects import PendingInterrupt
from savegame.integrations import langgraph
from savegame.ui._run import UNREADABLE, unreadable
from savegame.ui._site import Site, fragment
from savegame.ui._tokens import Access

#: Seconds between two polls of an open inbox.
POLL = 2


def etag(waiting: list[PendingInterrupt], access: Access | None = None) -> str:
    """What the list shows, and to whom (a viewer's list has no buttons: logging in with
    another token must repaint it)."""
    digest = hashlib.sha256(f"{access!r}\0".encode())
    for p in waiting:
        # The deadline too: an escalation changes what the entry shows.
        digest.update(f"{p.run_id}\0{p.interrupt_id}\0{p.on_expiry}\0".encode())
    return f'"{digest.hexdigest()[:32]}"'


def inbox_page(site: Site, request: Request) -> Response:
    try:
        waiting = langgraph.waiting(**site.on_store)
    except UNREADABLE as exc:  # one sealed entry the UI has no key for hides the list
        return site.page(request, "error.html", 503, title="Approvals", message=unreadable(exc))
    tag = etag(waiting, request.state.access)
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers={"etag": tag})
    name = "inbox_list.html" if fragment(request) else "inbox.html"
    response = site.page(request, name, waiting=waiting, etag=tag, poll=POLL)
    response.headers["etag"] = tag
    return response

"""The runs page: every run, newest first, filtered, a page at a time.

The list is the one ``savegame runs`` prints (``langgraph.shown_runs``): a LangGraph
run's status is what its latest checkpoint says, and runs savegame keeps for its own
bookkeeping are left out.

Pages follow each other by keyset (``savegame.client.list_runs(before=<last run id>)``), so
the hundredth page costs what the first does; the list asks for one run more than it
shows to know whether an older page exists, and never counts the table. Each row's
usage is its head checkpoint's (``savegame.client.history(run, limit=1)``): one indexed read
per shown run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from savegame import RunInfo, RunStatus
from savegame.integrations import langgraph
from savegame.model import Usage
from savegame.ui._site import Site, fragment

PAGE = 50
MAX_PAGE = 500
FILTERS = ("status", "workflow", "thread", "q")


@dataclass(frozen=True, slots=True)
class Row:
    run: RunInfo
    """Its ``status`` as every list shows it (a LangGraph run's: its latest checkpoint's)."""
    usage: Usage
    where: str | None = None
    """A LangGraph run's namespace: ``root`` or ``subgraph a > b``."""


class BadFilter(ValueError):
    """A query parameter the runs page cannot use; shown on the page."""


def _limit(text: str | None) -> int:
    if not text:
        return PAGE
    try:
        value = int(text)
    except ValueError:
        raise BadFilter(f"limit must be a number, not {text!r}") from None
    if not 1 <= value <= MAX_PAGE:
        raise BadFilter(f"limit must be between 1 and {MAX_PAGE}")
    return value


def _status(text: str) -> RunStatus | None:
    if not text:
        return None
    try:
        return RunStatus(text)
    except ValueError:
        raise BadFilter(f"unknown status {text!r}") from None


def rows(site: Site, request: Request) -> dict[str, Any]:
    """The page's context: filters, rows, the link to the next page."""
    q = request.query_params
    filters = {name: q.get(name, "").strip() for name in FILTERS}
    limit = _limit(q.get("limit"))
    found = langgraph.shown_runs(
        status=_status(filters["status"]), workflow=filters["workflow"] or None,
        thread_id=filters["thread"] or None, search=filters["q"] or None,
        before=q.get("before") or None, limit=limit + 1, **site.on_store,
    )  # fmt: skip
    shown = found[:limit]
    listed = []
    for run in shown:
        if run.head is not None:  # a LangGraph run: its checkpoints hold no usage
            listed.append(Row(run.info, Usage(), run.head.line.where))
            continue
        head = site.sg.history(run.info.run_id, limit=1)
        listed.append(Row(run.info, head[0].usage if head else Usage()))
    kept = {k: v for k, v in filters.items() if v}
    if q.get("limit"):
        kept["limit"] = str(limit)
    older = None
    if len(found) > limit:
        older = "/runs?" + urlencode({**kept, "before": shown[-1].info.run_id})
    return {
        "filters": filters,
        "rows": listed,
        "older": older,
        "first": "/runs" + (f"?{urlencode(kept)}" if kept else ""),
        "paged": bool(q.get("before")),
    }


def runs_page(site: Site, request: Request) -> Response:
    try:
        context = rows(site, request)
    except BadFilter as exc:
        filters = {name: request.query_params.get(name, "") for name in FILTERS}
        return site.page(request, "runs.html", 400, error=str(exc), filters=filters, rows=[],
                         older=None, first="/runs", paged=False)  # fmt: skip
    name = "runs_table.html" if fragment(request) else "runs.html"
    return site.page(request, name, error=None, **context)

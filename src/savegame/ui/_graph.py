"""A LangGraph thread's pages: a run of it (one namespace), a checkpoint, a diff.

SavegameSaver stores a LangGraph thread as savegame runs (one per namespace), so
every run page would show it; what a person needs to read there is LangGraph's:
the channels, the next nodes, the pending writes, and what the thread waits for,
with the form that answers it. The readers are ``savegame.integrations.langgraph``'s
(they need no graph, and a type this process lacks shows as a named placeholder);
the status is the one every list shows (:mod:`savegame.integrations.langgraph._waits`).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response

from savegame import RunInfo
from savegame.integrations import langgraph
from savegame.ui._site import Site, fragment

#: LangGraph checkpoints on a run's page, newest kept.
TIMELINE_PAGE = 200


def line_page(site: Site, request: Request, info: RunInfo) -> Response:
    """The page of ``info``, a run holding one namespace of a LangGraph thread."""
    opts = site.on_store
    waits = langgraph.thread_of(info.run_id, **opts)
    history = langgraph.line_history(info.run_id, limit=TIMELINE_PAGE, **opts)
    assert waits is not None and history is not None  # info is a LangGraph run
    line, rows = history
    head = waits.heads.get(info.run_id) or (rows[0] if rows else None)
    everything = request.query_params.get("all") == "1"
    journal = langgraph.line_effects(info.run_id, everything=everything, **opts)
    namespaces = [(r, waits.status(r), waits.heads[r.run_id]) for r in waits.runs]
    return site.page(
        request, "lg_run.html", run=info.with_status(waits.status(info)), stored=info.status,
        line=line, head=head, rows=list(reversed(rows)), full=len(rows) == TIMELINE_PAGE,
        waiting=langgraph.pending_of(waits), answered=[a for a in waits.asks if a.answered],
        namespaces=namespaces, effects=journal.effects if journal else [],
        hidden=journal.hidden if journal else 0, everything=everything, journal_error=None,
        shown_metadata=site.metadata, names=_names,
    )  # fmt: skip


def checkpoint_page(site: Site, request: Request, ident: str) -> Response | None:
    """A LangGraph checkpoint's page (or fragment), or None when ``ident`` is not one."""
    found = langgraph.find_checkpoint(ident, **site.on_store)
    if found is None:
        return None
    name = "lg_state.html" if fragment(request) else "lg_checkpoint.html"
    return site.page(request, name, cp=found, ident=ident, names=_names)


def diff_page(site: Site, request: Request, a: str, b: str) -> Response | None:
    """Two LangGraph checkpoints' channels compared, or None when neither is one."""
    found = langgraph.diff_checkpoints(a, b, **site.on_store)
    if found is None:
        return None
    name = "diff_body.html" if fragment(request) else "diff.html"
    return site.page(request, name, d=found.channels, lg=found, a=a, b=b, error=None)


def _names(tasks: Sequence[langgraph.Task]) -> str:
    return ", ".join(t.name for t in tasks)

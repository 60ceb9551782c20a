"""A run's page: its row, the timeline of its checkpoints, the journal, the thread's tree;
a checkpoint's state; the diff of two checkpoints.

What cannot be read is said where it would have been shown: a journal or a state
sealed with a key this UI was not given (``EncryptionKeyError``), or a record that
failed its check (``CorruptRecordError``), names the record and leaves the rest of the
page standing.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from savegame.client import Effect
from savegame.errors import CorruptRecordError, EncryptionKeyError
from savegame.inspect import RunNode, Tree
from savegame.integrations import langgraph
from savegame.ui import _graph
from savegame.ui._site import Site, fragment
from savegame.ui._timeline import timeline

#: Checkpoints on one page of a timeline.
TIMELINE_PAGE = 200
UNREADABLE = (EncryptionKeyError, CorruptRecordError)


def unreadable(exc: Exception) -> str:
    if isinstance(exc, EncryptionKeyError) or "keyring" in str(exc) or "encrypt" in str(exc):
        return (
            f"Encrypted, and this UI cannot open it: {exc}. Start `savegame ui` with the "
            "store's keys in SAVEGAME_KEYS to see it."
        )
    return f"This record failed its integrity check and is not shown: {exc}"


def _journal(site: Site, run_id: str) -> tuple[list[Effect], str | None]:
    try:
        return site.sg.effects(run_id), None
    except UNREADABLE as exc:
        return [], unreadable(exc)


def _tree(site: Site, run_id: str) -> tuple[Tree | None, str | None]:
    try:
        return site.sg.tree(run_id), None
    except UNREADABLE as exc:
        return None, unreadable(exc)


def run_page(site: Site, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    sg = site.sg
    info = sg.get_run(run_id)
    if langgraph.line_of(info) is not None:
        return _graph.line_page(site, request, info)
    before = request.query_params.get("before") or None
    headers = sg.history(run_id, limit=TIMELINE_PAGE, before=before)
    earlier = None
    if len(headers) == TIMELINE_PAGE:
        older = sg.history(run_id, limit=1, before=headers[-1].checkpoint_id)
        earlier = older[0] if older else None
    found, tree_error = _tree(site, run_id)
    forks: dict[str, list[RunNode]] = {} if found is None else found.forks_at(run_id)
    effects, journal_error = _journal(site, run_id)
    try:
        waiting = sg.pending(run_id)
    except UNREADABLE as exc:
        waiting, journal_error = [], unreadable(exc)
    head = headers[0] if headers and before is None else None
    return site.page(
        request, "run.html", run=info, run_metadata=site.metadata(info.metadata),
        run_error=site.text(info.error), head=head,
        moments=timeline(headers, forks, earlier), earlier=earlier, paged=before is not None,
        effects=effects, journal_error=journal_error, waiting=waiting,
        found=found, tree_error=tree_error, shown_metadata=site.metadata,
    )  # fmt: skip


def checkpoint_page(site: Site, request: Request) -> Response:
    ident = request.path_params["checkpoint_id"]
    found = _graph.checkpoint_page(site, request, ident)
    if found is not None:
        return found
    name = "state.html" if fragment(request) else "checkpoint.html"
    try:
        cp = site.sg.checkpoint(ident)
    except UNREADABLE as exc:
        return site.page(request, name, cp=None, error=unreadable(exc), ident=ident,
                         shown_metadata=site.metadata)  # fmt: skip
    return site.page(request, name, cp=cp, error=None, ident=ident, shown_metadata=site.metadata)


def diff_page(site: Site, request: Request) -> Response:
    a = request.query_params.get("a", "")
    b = request.query_params.get("b", "")
    name = "diff_body.html" if fragment(request) else "diff.html"
    if not a or not b:
        return site.page(
            request, name, 400, d=None, lg=None, a=a, b=b, error="pick two checkpoints"
        )
    if a == b:
        return site.page(
            request, name, 400, d=None, lg=None, a=a, b=b, error="pick two different checkpoints"
        )
    graph = _graph.diff_page(site, request, a, b)
    if graph is not None:
        return graph
    try:
        found = site.sg.diff(a, b)
    except UNREADABLE as exc:
        return site.page(request, name, d=None, lg=None, a=a, b=b, error=unreadable(exc))
    return site.page(request, name, d=found, lg=None, a=a, b=b, error=None)

"""The ASGI app: routes, the guard in front of them, errors as pages.

Every route is one page module's function; reading pages are plain functions,
which Starlette runs on its thread pool (the store's calls block), and actions are
``async`` only to read their form. Reading pages decode with placeholders
(:func:`savegame.codec.placeholders`): the UI's process need not import the classes
a run's state holds to show it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from savegame import SavegameError
from savegame.codec import placeholders
from savegame.errors import ConflictError, NotFoundError, RunStateError
from savegame.ui import _actions, _inbox, _run, _runs
from savegame.ui._guard import Guard
from savegame.ui._site import HERE, Site

ACTIONS = ("approve", "reject", "supply", "resolve", "cancel", "resume")


def _page(site: Site, view: Callable[[Site, Request], Response]) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        try:
            # A page shows states; a type this process lacks shows as its name, never a 400.
            with placeholders():
                return view(site, request)
        except NotFoundError as exc:
            return site.page(request, "error.html", 404, title="Not found", message=str(exc))
        except _run.UNREADABLE as exc:
            message = _run.unreadable(exc)
            return site.page(request, "error.html", 503, title="Cannot read it", message=message)
        except (RunStateError, ConflictError) as exc:
            return site.page(
                request, "error.html", 409, title="Cannot do that now", message=str(exc)
            )
        except SavegameError as exc:
            return site.page(request, "error.html", 400, title=type(exc).__name__, message=str(exc))

    return endpoint


def _action(site: Site, name: str) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        return await _actions.act(site, request, name)

    return endpoint


def build(site: Site, guard: Guard) -> Starlette:
    """The app serving ``site`` behind ``guard``; a read-only guard's app mounts no action
    (and the guard refuses every POST, naming the mode)."""
    actions = [
        *(
            Route(f"/runs/{{run_id:path}}/{name}", _action(site, name), methods=["POST"])
            for name in ACTIONS
        ),
        Route("/checkpoints/{checkpoint_id:path}/fork", _action(site, "fork"), methods=["POST"]),
    ]
    routes = [
        Route("/", lambda request: RedirectResponse("/runs", 303)),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/runs", _page(site, _runs.runs_page)),
        # :path, as a quoted "/" in an id reaches the app decoded; an action's route
        # ends in its name, so /runs/a/b/cancel is the cancel of run a/b.
        Route("/runs/{run_id:path}", _page(site, _run.run_page)),
        Route("/checkpoints/{checkpoint_id:path}", _page(site, _run.checkpoint_page)),
        Route("/diff", _page(site, _run.diff_page)),
        Route("/approvals", _page(site, _inbox.inbox_page)),
        *([] if guard.read_only else actions),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])

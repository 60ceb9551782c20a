"""``savegame ui``: a local web UI over the public API (``savegame[ui]``).

Server-rendered pages (Starlette, Jinja2) with htmx, which ships inside the package
(``static/htmx.min.js``, its license beside it): no CDN, no Node toolchain, works
offline. The pages read the store only through the public API, the methods of one
:class:`savegame.Savegame` handle the server holds (``runs``, ``history``,
``checkpoint``, ``diff``, ``effects``, ``tree``, ``pending``), and act only through it
(``approve``, ``reject``, ``resolve``, ``cancel``, ``fork``, ``resume``), like the CLI;
LangGraph threads through ``savegame.integrations.langgraph`` (its lists, readers and
``answer``), as the CLI does.

Where things are::

    _app.py        the routes, the guard in front of them, errors as pages
    _guard.py      binding, Host header, token, role, CSRF, security headers
    _tokens.py     the tokens: names, roles (viewer, approver), where they come from
    _site.py       what every page shares: the handle, the templates, hidden metadata
    _runs.py       the runs page: filters, keyset pages
    _run.py        a run: timeline, journal, tree; a checkpoint's state; a diff
    _timeline.py   checkpoints as a timeline: durations, resumes, retries, forks
    _inbox.py      the approvals inbox, polled with ETags
    _actions.py    approve, reject, resolve, cancel, resume, fork: confirm, then do
    _graph.py      a LangGraph run (one namespace of a thread), checkpoint and diff
    _values.py     any value as an escaped, collapsible tree
    templates/     the pages (Jinja2, autoescaped)
    static/        htmx, the stylesheet
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from savegame.errors import ConfigurationError
from savegame.ui._tokens import TOKEN_FILE_VAR, TOKEN_VAR, UIToken, gather
from savegame.ui._tokens import describe as describe_tokens

#: Where ``savegame ui`` listens unless told otherwise.
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]"})


#: What the ui extra installs; a missing one is named in the error.
EXTRA = frozenset({"starlette", "uvicorn", "jinja2", "markupsafe"})


def _needs_extra(exc: ImportError) -> Exception:
    """The error for a failed import: the extra to install when one of its packages is
    missing, else the import error itself (a bug is not a missing extra)."""
    missing = (exc.name or "").partition(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or missing not in EXTRA:
        return exc
    return ConfigurationError(
        f"savegame ui needs the ui extra: pip install 'savegame[ui]' (missing: {missing})"
    )


def create_app(
    store: Any = None,
    *,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    tokens: Sequence[UIToken | str] = (),
    hosts: frozenset[str] | None = None,
    storage: Any = None,
    continue_runs: bool = True,
    read_only: bool = False,
) -> Any:
    """The ASGI app of the UI over ``store``: a :class:`savegame.Savegame` handle, a URL, a
    Store, or None for $SAVEGAME_STORE (a handle opened from one of those is never closed
    by the app: it lives as long as the process serving it).

    Args:
        port: the port it is served on (a request's Host header must name it).
        token: a token every request must carry (``SECRET``, or ``NAME:ROLE=SECRET``);
            see :mod:`savegame.ui._guard`.
        tokens: more of them (:class:`UIToken`, or text as ``token``): a request
            carries one; a viewer's reads, an approver's also acts, and its decisions
            record ``authenticated_as="ui-token:NAME"``.
        hosts: the host names requests may address (default: the loopback names;
            with a token, any).
        storage: the keyring and settings to read records with (default: $SAVEGAME_KEYS ...);
            not with a handle, which has its own.
        continue_runs: after a decision, continue the run in this process where its
            workflow imports (else it stays queued for ``savegame worker``).
        read_only: mount no action, show none, refuse every POST.

    Raises:
        ConfigurationError: the ui extra is not installed, the store cannot be opened,
            or a token is malformed.
    """
    try:
        from savegame.ui._app import build
        from savegame.ui._guard import Guard
        from savegame.ui._site import Site
    except ImportError as exc:
        raise _needs_extra(exc) from None
    from savegame import Savegame, connect
    from savegame.codec.storage import resolve

    accepted = gather(token, tokens, environ={})  # the caller's tokens, not the environment's
    if isinstance(store, Savegame):
        if storage is not None:
            raise ConfigurationError(
                "create_app: a handle has its own storage; pass one or the other"
            )
        sg = store
    else:
        sg = connect(store, storage=resolve(storage), create=False)
    site = Site(sg, continue_runs=continue_runs)
    default = None if accepted else LOOPBACK
    guard = Guard(port, accepted, default if hosts is None else hosts, read_only)
    return build(site, guard)


def serve(
    store: Any = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    tokens: Sequence[UIToken | str] = (),
    token_file: Path | str | None = None,
    continue_runs: bool = True,
    read_only: bool = False,
    on_ready: Any = None,
) -> None:
    """Serve the UI with uvicorn until interrupted.

    The tokens are ``token`` and ``tokens`` (else ``$SAVEGAME_UI_TOKEN``) and those of
    ``token_file`` (else ``$SAVEGAME_UI_TOKEN_FILE``), as :func:`create_app` takes them;
    ``on_ready(tokens)`` is called with them before the server starts (to say how to
    log in: never print a secret).

    Raises:
        ConfigurationError: a host other machines can reach without a token, a token
            shorter than 16 characters or malformed, or the ui extra is not installed.
    """
    try:
        import uvicorn

        from savegame.ui._guard import check_bind
    except ImportError as exc:
        raise _needs_extra(exc) from None
    accepted = gather(token, tokens, token_file)
    check_bind(host, accepted)
    hosts = None if accepted else LOOPBACK | {host}
    app = create_app(
        store, port=port, tokens=accepted, hosts=hosts, continue_runs=continue_runs,
        read_only=read_only,
    )  # fmt: skip
    if on_ready is not None:
        on_ready(accepted)
    uvicorn.run(app, host=host, port=port, log_level="warning")


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_FILE_VAR",
    "TOKEN_VAR",
    "UIToken",
    "create_app",
    "describe_tokens",
    "serve",
]

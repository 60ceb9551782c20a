"""What every page of one server shares: the store handle, the templates, how a page is answered.

Pages call the public API only: the methods of the one handle the server holds
(``site.sg.runs``, ``site.sg.history`` ...; :func:`savegame.connect`), and the LangGraph
readers with its store (``site.on_store``); the templates escape everything
(Jinja2's autoescape, and :mod:`savegame.ui._values` for trees), and values that
must stay hidden (sensitive metadata, sealed values) are replaced here before a
template sees them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from savegame import RunStatus, Savegame, __version__
from savegame.client import Effect, owner_gone
from savegame.codec.storage import StorageConfig, resolve
from savegame.model import EffectKind, EffectStatus
from savegame.ui import _values
from savegame.ui._tokens import Access

HERE = Path(__file__).parent
SEALED = "$sg:enc:"
"""How a metadata value the keyring could not open starts (savegame.codec keeps it so)."""
HIDDEN = "hidden: sensitive metadata"
LOCKED = "encrypted: the UI has no key for it (SAVEGAME_KEYS)"
NOBODY = Access(read_only=True)
"""A request the guard did not pass (none reaches a page): it may do nothing."""


def ago(moment: datetime | None) -> str:
    if moment is None:
        return ""
    seconds = (datetime.now(timezone.utc) - moment).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{max(int(seconds), 0)}s ago"


def when(moment: datetime | None) -> str:
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def in_doubt(e: Effect) -> bool:
    """A write that started and has no result: it may or may not have happened."""
    return e.kind is EffectKind.WRITE and e.status is EffectStatus.PENDING


@dataclass
class Site:
    """One server's handle on its store, its settings and templates."""

    sg: Savegame
    """Every page's calls go through it; it lives as long as the server (the app never
    closes it)."""
    continue_runs: bool = True
    """After a decision, continue the run in the UI's process (where its workflow imports)."""
    workers: list[threading.Thread] = field(default_factory=list)
    """Threads continuing decided runs (daemons: they never hold the server's exit)."""

    storage: StorageConfig = field(init=False)
    """What the handle reads records with (its own, or the environment's): what the pages
    hide as sensitive or sealed goes by it."""

    def __post_init__(self) -> None:
        self.storage = resolve(self.sg.storage)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        # Jinja's urlencode keeps "/" (it quotes paths): a run id "x/../victim" would
        # link to /runs/x/../victim, which a browser reads as /runs/victim. Every value
        # the templates put in a URL is one path segment or one query value.
        self.templates.filters["urlencode"] = url_part
        self.templates.globals.update(
            version=__version__, statuses=[s.value for s in RunStatus], tree=_values.render,
            scalar=_values.scalar, ago=ago, when=when, duration=duration,
            store_url=self.sg.store.url, encrypted=self.storage.encrypted, in_doubt=in_doubt,
            owner_gone=owner_gone,  # the rule `savegame runs` shows a dead owner by
        )  # fmt: skip

    @property
    def on_store(self) -> dict[str, Any]:
        """``store=`` and ``storage=`` for the readers outside the handle (LangGraph's)."""
        return {"store": self.sg.store, "storage": self.sg.storage}

    def metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Metadata fit to show: sensitive keys' values and values still sealed replaced."""
        shown: dict[str, Any] = {}
        for key, value in metadata.items():
            if key in self.storage.sensitive_metadata:
                shown[key] = HIDDEN
            elif isinstance(value, str) and value.startswith(SEALED):
                shown[key] = LOCKED
            else:
                shown[key] = value
        return shown

    def text(self, value: str | None) -> str | None:
        """A stored text (a run's error) that may be sealed."""
        if value is not None and value.startswith(SEALED):
            return LOCKED
        return value

    def render(self, request: Request, name: str, **context: Any) -> str:
        template = self.templates.get_template(name)
        return template.render(
            request=request, csrf=request.state.csrf, path=request.url.path,
            access=getattr(request.state, "access", NOBODY), **context,
        )  # fmt: skip

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.render(request, name, **context), status)


def url_part(value: Any) -> str:
    """``value`` quoted as one path segment or query value: ``/`` too."""
    return quote(str(value), safe="")


def fragment(request: Request) -> bool:
    """An htmx request for part of a page (not a boosted page load)."""
    h = request.headers
    return (
        h.get("hx-request") == "true"
        and "hx-boosted" not in h
        and "hx-history-restore-request" not in h
    )

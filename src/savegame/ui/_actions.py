"""What a person does from the UI: approve, reject, answer an interrupt, resolve, cancel,
resume, fork.

Each action is two POSTs: the first shows what will happen (the call and its
arguments, the writes a fork may repeat) on a confirmation page; the second, with
``confirmed=1``, does it through the public API with ``by=`` the name the person
gave and, on a UI with tokens, ``authenticated_as=`` the token the request carried
(``ui-token:NAME``), which the journal keeps beside the decision (who said they
decided, with which token, and when: the audit entry). Both pass the role and CSRF
checks of :mod:`savegame.ui._guard` first (a viewer's token, or a read-only server,
never gets here).

A decided run goes on in the UI's process, on a thread of its own, where its
workflow imports here (``savegame.resume``); where it does not, or with
``--no-continue``, the decision leaves it queued for ``savegame worker``. A
LangGraph thread's answer is recorded only (``langgraph.answer``): the application
that runs the graph continues it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import quote, unquote, urlencode

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import savegame
from savegame import RunStatus, SavegameError
from savegame.codec import placeholders
from savegame.errors import ConfigurationError
from savegame.integrations import langgraph
from savegame.model import EffectKind
from savegame.ui._guard import form_of
from savegame.ui._site import Site

log = logging.getLogger("savegame.ui")
BY_COOKIE = "sg_by"
#: How long the UI remembers who decided (a name, as the CLI's user@host: no secret).
BY_MAX_AGE = 365 * 24 * 3600
_UNSET: Any = object()


class BadInput(ValueError):
    """A form field the action cannot use; shown on the confirmation page."""


def _json(text: str, what: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{what} is not JSON: {exc}") from None


def _object(text: str, what: str) -> dict[str, Any] | None:
    if not text.strip():
        return None
    value = _json(text, what)
    if not isinstance(value, dict):
        raise BadInput(f'{what} must be a JSON object, e.g. {{"amount": 20}}')
    return value


def _paths(text: str) -> dict[str, Any] | None:
    """``path=JSON`` lines, as ``savegame fork --set`` takes them."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        path, eq, value = line.partition("=")
        if not eq or not path.strip():
            raise BadInput(f"{line!r} must read PATH=JSON, e.g. order.amount=20")
        out[path.strip()] = _json(value, f"the value of {path.strip()}")
    return out or None


def continue_in_background(site: Site, run_id: str) -> None:
    """Resume a decided run on a thread of this process (it stays queued where that fails)."""
    if not site.continue_runs:
        return

    def go() -> None:
        try:
            site.sg.resume(run_id)
        except Exception as exc:  # the run stays where it is (queued, failed): the page shows it
            log.warning("run %s was not continued here: %s", run_id, exc)

    thread = threading.Thread(target=go, name=f"savegame-ui-resume-{run_id}", daemon=True)
    site.workers.append(thread)
    thread.start()


def _back(request: Request, target: str, done: str, by: str) -> Response:
    response = RedirectResponse(f"{target}?{urlencode({'done': done})}", 303)
    # %-encoded: a header is latin-1, and a name need not be (Łukasz, 王).
    remembered = quote(by[:200], safe="")
    response.set_cookie(
        BY_COOKIE, remembered, max_age=BY_MAX_AGE, samesite="strict", httponly=True, path="/"
    )
    return response


async def act(site: Site, request: Request, action: str) -> Response:
    form = await form_of(request)
    by = form.get("by", "").strip()
    ident = request.path_params.get("run_id") or request.path_params["checkpoint_id"]
    remembered = unquote(request.cookies.get(BY_COOKIE, ""))
    context: dict[str, Any] = {"action": action, "form": form, "ident": ident,
                               "by": by or remembered, "error": None,
                               # what a preview that raised did not get to fill in
                               "run": None, "waiting": None, "effect": None, "plan": None,
                               "value": None, "graph": False}  # fmt: skip
    try:
        with placeholders():  # the preview shows what the person decides on, as stored
            context.update(await _preview(site, action, ident, form))
        if form.get("confirmed") != "1":
            return site.page(request, "confirm.html", **context)
        if not by and action != "resume":
            raise BadInput("say who you are (the journal records who decided)")
        checked = request.state.access.authenticated_as
        target, done = await _do(site, action, ident, form, by, checked, graph=context["graph"])
    except (BadInput, SavegameError) as exc:
        context["error"] = str(exc)
        return site.page(request, "confirm.html", 400, **context)
    return _back(request, target, done, by)


async def _preview(site: Site, action: str, ident: str, form: dict[str, str]) -> dict[str, Any]:
    """What the confirmation page shows, read before anything is written."""
    from starlette.concurrency import run_in_threadpool

    sg, opts = site.sg, site.on_store
    if action == "fork":
        plan = await run_in_threadpool(lambda: sg.plan_fork(ident))
        return {"plan": plan, "run": None}
    shown = await run_in_threadpool(lambda: langgraph.shown_run(ident, **opts))
    run = shown.info
    waiting = await run_in_threadpool(lambda: langgraph.waiting(ident, **opts))
    chosen = [w for w in waiting if w.interrupt_id == form.get("interrupt_id")]
    effect = None
    if action == "resolve":
        effects = await run_in_threadpool(lambda: sg.effects(ident))
        found = [e for e in effects if e.request_id == form.get("request_id")]
        if not found:
            raise BadInput(f"run {ident} has no journal entry {form.get('request_id')!r}")
        effect = found[0]
    if action in ("approve", "reject", "supply") and not chosen:
        if shown.head is not None:  # a LangGraph thread: say who answered, if anyone did
            waits = await run_in_threadpool(lambda: langgraph.thread_of(ident, **opts))
            asked = waits.ask(form.get("interrupt_id", "")) if waits is not None else None
            if asked is not None and asked.answered is not None:
                raise BadInput(
                    f"interrupt {asked.interrupt_id} was answered already, by "
                    f"{asked.answered.by} at {asked.answered.at}"
                )
        raise BadInput(
            f"run {ident} does not wait for {form.get('interrupt_id')!r} (decided already?)"
        )
    value = _UNSET
    if action == "supply":
        if chosen[0].kind is not EffectKind.INTERRUPT:
            raise BadInput(f"{chosen[0].name} is an approval: approve or reject it")
        # Checked before the confirmation shows it, and again (pure data) when recorded.
        value = _json(form.get("value", ""), "the value")
    return {"run": run, "waiting": chosen[0] if chosen else None, "effect": effect,
            "plan": None, "value": value, "graph": shown.head is not None}  # fmt: skip


async def _do(
    site: Site,
    action: str,
    ident: str,
    form: dict[str, str],
    by: str,
    checked: str | None,
    *,
    graph: bool,
) -> tuple[str, str]:
    """Do it; returns the page to go back to and what was done. ``checked``: the identity
    the guard found (recorded beside ``by``); ``graph``: ``ident`` is a LangGraph run."""
    from starlette.concurrency import run_in_threadpool

    sg = site.sg
    said: dict[str, Any] = {"by": by, "authenticated_as": checked}
    page = f"/runs/{quote(ident, safe='')}"
    if action == "approve":
        edit = _object(form.get("edit", ""), "the edited arguments")
        await run_in_threadpool(lambda: sg.approve(
            ident, interrupt_id=form["interrupt_id"], edit=edit, resume=False, **said
        ))  # fmt: skip
        continue_in_background(site, ident)
        return page, "approved"
    if action == "reject":
        reason = form.get("reason", "").strip()
        if not reason:
            raise BadInput("a rejection needs a reason (the step is told it)")
        await run_in_threadpool(lambda: sg.reject(
            ident, reason=reason, interrupt_id=form["interrupt_id"], resume=False, **said
        ))  # fmt: skip
        continue_in_background(site, ident)
        return page, "rejected"
    if action == "supply" and graph:
        value = _json(form.get("value", ""), "the value")
        await run_in_threadpool(lambda: langgraph.answer(
            ident, value, interrupt_id=form["interrupt_id"], **said, **site.on_store
        ))  # fmt: skip
        return page, "answered"  # the graph's application continues it, not the UI
    if action == "supply":
        value = _json(form.get("value", ""), "the value")
        await run_in_threadpool(lambda: sg.supply(
            ident, value, interrupt_id=form["interrupt_id"], resume=False, **said
        ))  # fmt: skip
        continue_in_background(site, ident)
        return page, "answered"
    if action == "resolve":
        done = form.get("done")
        if done not in ("yes", "no"):
            raise BadInput("say whether the call happened (done) or not")
        extra = {"result": _json(form.get("result", ""), "the result")} if done == "yes" else {}
        await run_in_threadpool(lambda: sg.resolve(
            ident, form["request_id"], done=done == "yes", **said, **extra
        ))  # fmt: skip
        return page, "resolved"
    if action == "cancel":
        compensate = form.get("compensate") == "on"
        await run_in_threadpool(
            lambda: sg.cancel(ident, compensate_effects=compensate, wait=10.0, **said)
        )
        return page, "cancelled"
    if action == "resume":
        info = await run_in_threadpool(lambda: sg.get_run(ident))
        live = info.lease is not None and savegame.client.owner_gone(info) is None
        if info.status.finished or (info.status is RunStatus.RUNNING and live):
            raise BadInput(f"run {ident} is {info.status.value}: nothing to resume")
        continue_in_background(site, ident)
        return page, "resumed"
    if action == "fork":
        mode = form.get("mode", "replay")
        if mode not in ("replay", "redo"):
            raise BadInput("mode is replay or redo")
        update = _object(form.get("update", ""), "the state keys")
        paths = _paths(form.get("set", ""))
        why = form.get("reason", "").strip() or None
        result = await run_in_threadpool(lambda: sg.fork(
            ident, update=update, set=paths, reason=why, mode=mode, **said,  # type: ignore[arg-type]
            run=False,
        ))  # fmt: skip
        continue_in_background(site, result.run_id)
        return f"/runs/{quote(result.run_id, safe='')}", "forked"
    raise ConfigurationError(f"unknown action {action!r}")

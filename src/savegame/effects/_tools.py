"""Tools: functions that touch the outside world, declared with what kind of effect they have.

``@tool(effect="write", idempotent=True, compensate="cancel_refund")`` tells the
runtime how to call the function exactly once across crashes: a write's intent
is journaled before the call and its result after; an idempotent tool gets a
stable ``request_id`` the outside system can deduplicate on; ``reconcile``
asks the outside world whether an in-doubt call happened; ``compensate``
names the tool that undoes it; ``approval`` gates it behind a person;
``retries``, ``backoff`` and ``timeout`` say how long one call may take and how
often it is tried (see :mod:`savegame.effects._attempts` for the rules).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, overload

from savegame.effects._expiry import OnExpiry, check_expiry
from savegame.effects._retry import (
    DEFAULT_BACKOFF,
    Backoff,
    RetryOn,
    as_backoff,
    check_retries,
)
from savegame.errors import ConfigurationError

EffectType = Literal["read", "write"]
Approval = bool | Callable[[dict[str, Any]], bool]

_registry: dict[str, Tool] = {}


@dataclass(frozen=True, eq=False)
class Tool:
    """A function with its effect declaration. Call it through ``ctx.call``; calling it directly bypasses the journal."""

    fn: Callable[..., Any]
    name: str
    effect: EffectType
    idempotent: bool
    compensate: str | None
    """Name of the tool that undoes this one (called with the original arguments and ``result``)."""
    approval: Approval
    reconcile: Callable[[str], Any] | None
    """``reconcile(request_id)`` returns the call's result if it happened, None if it did not."""
    safe_errors: tuple[type[BaseException], ...] = ()
    """Exceptions that prove the call did not happen (refused before anything was done):
    a write that raises one is settled not-done and may be called again."""
    durable: bool = False
    """A read whose result is committed to the journal when it returns (one store write),
    rather than with the next checkpoint: for reads that cost money or time. Writes and
    model calls always are."""
    retries: int = 0
    """Attempts after the first when a call raises one of ``retry_on`` and calling again
    is safe (a read; a write settled not-done). Each attempt is journaled with its error."""
    backoff: Backoff = DEFAULT_BACKOFF
    """The waits between attempts."""
    timeout: float | None = None
    """Seconds one attempt may take; then it raises TimedOutError."""
    retry_on: RetryOn = (Exception,)
    """The exceptions worth another attempt."""
    expires: timedelta | None = None
    """How long a person has to decide the approval (None: no limit); see
    :mod:`savegame.effects._expiry`."""
    on_expiry: OnExpiry = "reject"
    """What the deadline decides: ``"reject"`` (deny) or ``"escalate"`` (an event)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    @property
    def takes_request_id(self) -> bool:
        return "request_id" in inspect.signature(self.fn).parameters

    def proves_not_done(self, error: BaseException) -> bool:
        """Whether ``error`` is one of the tool's ``safe_errors``."""
        return bool(self.safe_errors) and isinstance(error, self.safe_errors)

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        if callable(self.approval):
            return bool(self.approval(dict(arguments)))
        return bool(self.approval)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments by name (defaults applied), without ``request_id``."""
        sig = inspect.signature(self.fn)
        # request_id is the runtime's to pass, never the caller's.
        sig = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "request_id"])
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigurationError(f"bad arguments for tool {self.name}: {exc}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for name, param in sig.parameters.items():
            if param.kind is param.VAR_KEYWORD and name in arguments:
                arguments.update(arguments.pop(name))
        return arguments

    def invoke(self, arguments: Mapping[str, Any], request_id: str) -> Any:
        """Call with named arguments, passing ``request_id`` when the function takes it."""
        extra = {"request_id": request_id} if self.takes_request_id else {}
        return self.fn(**arguments, **extra)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    effect: EffectType = "read",
    idempotent: bool = False,
    compensate: str | None = None,
    approval: Approval = False,
    reconcile: Callable[[str], Any] | None = None,
    safe_errors: tuple[type[BaseException], ...] = (),
    durable: bool = False,
    name: str | None = None,
    retries: int = 0,
    backoff: Backoff | float = ...,
    timeout: float | None = None,
    retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
    expires: timedelta | None = None,
    on_expiry: OnExpiry = "reject",
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    effect: EffectType = "read",
    idempotent: bool = False,
    compensate: str | None = None,
    approval: Approval = False,
    reconcile: Callable[[str], Any] | None = None,
    safe_errors: tuple[type[BaseException], ...] = (),
    durable: bool = False,
    name: str | None = None,
    retries: int = 0,
    backoff: Backoff | float = DEFAULT_BACKOFF,
    timeout: float | None = None,
    retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
    expires: timedelta | None = None,
    on_expiry: OnExpiry = "reject",
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool; usable bare (``@tool``, a read) or with options.

    Args:
        effect: ``"read"`` (safe to repeat) or ``"write"`` (changes the world).
        idempotent: the tool takes ``request_id`` and the outside system
            deduplicates on it, so an in-doubt call may be retried with the same id.
        compensate: the name of the tool that undoes a completed call (saga).
        approval: True, or a predicate on the arguments, to require a person's approval first.
        reconcile: ``reconcile(request_id)`` -> the result if the call happened, else None.
            Also asked at once when a write raises.
        safe_errors: exception types that prove a write did not happen (a validation error
            the remote side raised before doing anything). Any other exception leaves a
            non-idempotent, unreconcilable write in doubt: the run stops for a person.
        durable: a read's result is committed to the journal when the call returns, so
            a crash before the next checkpoint does not call it again (a paid search, a
            slow query). Without it a read's result is saved with the next checkpoint,
            or sooner with the next write, durable read, model call or interrupt.
        name: the tool's name (default: the function's name).
        retries: attempts after the first when a call raises one of ``retry_on`` and calling
            again is safe: a read, or a write whose failure is settled not-done (idempotent,
            ``safe_errors``, ``reconcile``). Any other write that raised is in doubt and
            never retried, so retries on such a write are refused here.
        backoff: the waits between attempts: seconds (the first) or a :class:`Backoff`.
        timeout: seconds per attempt, then TimedOutError. An async tool is cancelled; a
            sync one is left running in its thread (which cannot be stopped), so a
            timed-out sync write is in doubt unless the tool is idempotent.
        retry_on: the exceptions worth another attempt (default: any Exception).
        expires: how long a person has to decide the approval, from when it is asked;
            the deadline is stored with it and survives restarts. None: no limit.
        on_expiry: what the deadline decides: ``"reject"`` (the default: deny; the call
            raises ApprovalRejected with ``by="expiry"``) or ``"escalate"`` (the approval
            stays open for a person and an ``approval.escalated`` event is sent to the run).
    """
    if effect not in ("read", "write"):
        raise ConfigurationError(f"tool effect must be 'read' or 'write', not {effect!r}")
    safe = tuple(safe_errors)
    for kind in safe:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise ConfigurationError(f"safe_errors must be exception classes, not {kind!r}")
    waits = as_backoff(backoff)

    def wrap(func: Callable[..., Any]) -> Tool:
        tool_name = name or func.__name__
        kinds = check_retries(retries, timeout, retry_on, f"tool {tool_name}")
        limit = check_expiry(expires, on_expiry, approval, f"tool {tool_name}")
        made = Tool(
            func,
            tool_name,
            effect,
            idempotent=idempotent,
            compensate=compensate,
            approval=approval,
            reconcile=reconcile,
            safe_errors=safe,
            durable=durable,
            retries=retries,
            backoff=waits,
            timeout=timeout,
            retry_on=kinds,
            expires=limit,
            on_expiry=on_expiry,
        )
        _refuse_unsafe(made)
        # Registered by name so a compensation can be found in a fresh process
        # once the workflow's module has been imported.
        _registry[tool_name] = made
        return made

    if fn is not None:
        return wrap(fn)
    return wrap


def _refuse_unsafe(t: Tool) -> None:
    """Refuse a declaration the rules cannot keep: an idempotent tool with no request id,
    an approval that is not one, retries on a write that has no safe way to retry."""
    if t.idempotent and not t.takes_request_id:
        raise ConfigurationError(
            f"tool {t.name} is declared idempotent but takes no request_id parameter"
        )
    check_approval(t.approval, f"tool {t.name}")
    if t.retries and t.effect == "write" and not (t.idempotent or t.safe_errors or t.reconcile):
        raise ConfigurationError(
            f"tool {t.name}: retries on a write need a way to tell that a failed call did not "
            "happen: idempotent=True (called again with the same request id), safe_errors="
            "(...) or reconcile=...; any other write that raised is in doubt and never retried"
        )


def as_tool(obj: Any) -> Tool:
    """A Tool as is; a plain function as a read tool (journaled, but never treated as a write)."""
    if isinstance(obj, Tool):
        return obj
    if callable(obj):
        return Tool(
            obj,
            getattr(obj, "__name__", repr(obj)),
            "read",
            idempotent=False,
            compensate=None,
            approval=False,
            reconcile=None,
        )
    raise ConfigurationError(f"{obj!r} is not a tool or a function")


def check_approval(approval: Any, owner: str) -> None:
    """Refuse an ``approval`` that is neither a bool nor a predicate on the arguments."""
    if not (isinstance(approval, bool) or callable(approval)):
        raise ConfigurationError(
            f"{owner}: approval must be True, False or a function of the arguments "
            f"returning a bool, not {approval!r}"
        )


def registered(name: str) -> Tool | None:
    """The tool registered under ``name`` (its module was imported), or None."""
    return _registry.get(name)


def close_match(name: str) -> str:
    """`` (did you mean 'x'?)`` for the registered tool name nearest ``name``, or ''."""
    near = difflib.get_close_matches(name, list(_registry), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def unknown_compensation(t: Tool) -> str | None:
    """Why ``t``'s ``compensate=`` names no registered tool, or None when it does (or has none)."""
    if t.compensate is None or t.compensate in _registry:
        return None
    return (
        f"tool {t.name} declares compensate={t.compensate!r}, but no tool of that name is "
        f"registered{close_match(t.compensate)}"
    )


def tool_named(name: str) -> Tool:
    found = _registry.get(name)
    if found is None:
        raise ConfigurationError(
            f"no tool named {name!r} is registered{close_match(name)}; "
            "import the module that defines it"
        )
    return found

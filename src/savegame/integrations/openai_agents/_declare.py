"""What a function tool is to savegame: a read, or a write (idempotent, gated by a
person, reconciled, with errors that prove it did not happen), as ``savegame.tool``
would say of it. Declared by tool name on the runner (``tools={"refund": {...}}``) or
on the tool itself with :func:`declare`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from savegame.errors import ConfigurationError

OPTIONS = frozenset({"effect", "idempotent", "approval", "reconcile", "safe_errors"})
ATTRIBUTE = "__savegame__"
"""Where :func:`declare` keeps a tool's options (read before the tool is copied)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Unit:
    """How one tool is called: what ``savegame.tool`` would say of it."""

    effect: Literal["read", "write"] = "read"
    idempotent: bool = False
    approval: bool = False
    reconcile: Callable[[str], Any] | None = None
    safe_errors: tuple[type[BaseException], ...] = field(default=())

    @classmethod
    def of(cls, declared: Mapping[str, Any], where: str) -> Unit:
        unknown = set(declared) - OPTIONS
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown savegame option(s) {sorted(unknown)}; "
                f"the options are {sorted(OPTIONS)}"
            )
        effect = declared.get("effect", "read")
        if effect not in ("read", "write"):
            raise ConfigurationError(f"{where}: effect must be 'read' or 'write', not {effect!r}")
        approval = declared.get("approval", False)
        if not isinstance(approval, bool):
            # The SDK's own needs_approval= is where a predicate goes: it is asked per call.
            raise ConfigurationError(
                f"{where}: approval must be True or False (a predicate belongs in the "
                "tool's needs_approval=)"
            )
        unit = cls(
            effect=effect,
            idempotent=bool(declared.get("idempotent", False)),
            approval=approval,
            reconcile=declared.get("reconcile"),
            safe_errors=tuple(declared.get("safe_errors", ())),
        )
        if unit.effect == "read" and (unit.idempotent or unit.reconcile or unit.approval):
            # Only a write has an intent to gate, deduplicate or reconcile.
            raise ConfigurationError(
                f"{where}: idempotent, reconcile and approval are for writes (effect='write')"
            )
        return unit


READ = Unit()


def declare(tool: T, **options: Any) -> T:
    """Say what a function tool is to savegame, on the tool itself::

        refund = declare(function_tool(refund_order), effect="write", idempotent=True)

    The options are :func:`savegame.tool`'s: ``effect``, ``idempotent`` (the tool reads
    :func:`request_id` and the outside system deduplicates on it), ``approval``,
    ``reconcile(request_id)``, ``safe_errors``. Returns ``tool``.
    """
    name = getattr(tool, "name", repr(tool))
    Unit.of(options, f"declare({name!r})")  # refused now, not at the first call
    setattr(tool, ATTRIBUTE, dict(options))
    return tool


def unit_of(tool: object, declared: Mapping[str, Unit]) -> Unit:
    name = str(getattr(tool, "name", ""))
    own = getattr(tool, ATTRIBUTE, None)
    if isinstance(own, Mapping):
        return Unit.of(own, f"declare({name!r})")
    return declared.get(name, READ)

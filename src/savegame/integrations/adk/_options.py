"""What a tool call is journaled as: ``savegame.tool``'s options, declared per tool name
on :class:`SavegamePlugin` (``tools={"refund": {"effect": "write", "approval": True}}``).

A tool not declared is a read, unless ADK's own ``FunctionTool(require_confirmation=...)``
gates it: a call that needs a person's yes is a write to savegame (a gate needs an intent
to hold), and ADK's confirmation becomes savegame's approval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from savegame.errors import ConfigurationError

Approval = bool | Callable[[dict[str, Any]], bool]
_OPTIONS = frozenset({"effect", "idempotent", "approval", "reconcile", "safe_errors"})


@dataclass(frozen=True)
class Unit:
    """How one tool is called: what ``savegame.tool`` would say of it."""

    effect: Literal["read", "write"] = "read"
    idempotent: bool = False
    approval: Approval = False
    reconcile: Callable[[str], Any] | None = None
    safe_errors: tuple[type[BaseException], ...] = field(default=())
    declared: bool = False
    """Declared by name on the plugin (not a default read)."""

    @classmethod
    def of(cls, declared: Mapping[str, Any], where: str) -> Unit:
        if not isinstance(declared, Mapping):
            raise ConfigurationError(
                f"{where}: a dict of savegame.tool's options, not {type(declared).__name__}"
            )
        unknown = set(declared) - _OPTIONS
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown savegame option(s) {sorted(unknown)}; "
                f"the options are {sorted(_OPTIONS)}"
            )
        effect = declared.get("effect", "read")
        if effect not in ("read", "write"):
            raise ConfigurationError(f"{where}: effect must be 'read' or 'write', not {effect!r}")
        unit = cls(
            effect=effect,
            idempotent=bool(declared.get("idempotent", False)),
            approval=declared.get("approval", False),
            reconcile=declared.get("reconcile"),
            safe_errors=tuple(declared.get("safe_errors", ())),
            declared=True,
        )
        if unit.effect == "read" and (unit.idempotent or unit.reconcile or unit.approval):
            # Only a write has an intent to gate, deduplicate or reconcile.
            raise ConfigurationError(
                f"{where}: idempotent, reconcile and approval are for writes (effect='write')"
            )
        return unit

    def confirmed_by_adk(self, tool_name: str) -> Unit:
        """This unit for a call ADK's ``require_confirmation`` gates: a write a person
        approves."""
        if self.declared and self.effect == "read":
            raise ConfigurationError(
                f"tool {tool_name!r}: ADK's require_confirmation gates it, but "
                "SavegamePlugin(tools=...) declares it a read; a gated call is a write"
            )
        return replace(self, effect="write", approval=True)


READ = Unit()


def units(tools: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Unit]:
    return {
        name: Unit.of(options, f"SavegamePlugin(tools=...)[{name!r}]")
        for name, options in (tools or {}).items()
    }

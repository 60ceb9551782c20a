"""Secrets stay out of snapshots: only a reference is saved, resolved again on load.

``ctx.secret("STRIPE_KEY")`` returns a :class:`Secret`. Put it in the state if a
later step needs it: the checkpoint stores ``{"$sg:secret": "STRIPE_KEY"}``, never
the value, and a resumed run (on any machine) gets a Secret that resolves the
name again through the secrets provider. A workflow can also declare state keys
whose values are secrets (``Workflow(..., secrets={"api_key": "OPENAI_API_KEY"})``):
their values are replaced by references when saved and resolved when loaded.

The default provider reads environment variables; ``set_provider`` installs
another (a vault client, a test dict).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

from savegame.errors import ConfigurationError


class SecretsProvider(Protocol):
    def get(self, name: str) -> str | None:
        """The secret's value, or None when it is unknown."""
        ...


class EnvSecrets:
    """Secrets from environment variables (the default)."""

    def get(self, name: str) -> str | None:
        return os.environ.get(name)


class DictSecrets:
    """Secrets from a mapping (tests, scripts)."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def get(self, name: str) -> str | None:
        return self._values.get(name)


_provider: SecretsProvider = EnvSecrets()


def set_provider(provider: SecretsProvider) -> None:
    """Use ``provider`` to resolve secrets from now on (process-wide)."""
    global _provider
    _provider = provider


def resolve(name: str) -> str:
    value = _provider.get(name)
    if value is None:
        raise ConfigurationError(
            f"secret {name!r} is not available from the secrets provider "
            f"({type(_provider).__name__}); set it before resuming"
        )
    return value


class Secret:
    """A named secret whose value is looked up when needed and never saved."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not name:
            raise ConfigurationError("a secret needs a name")
        self.name = name

    def reveal(self) -> str:
        """The secret's value from the provider (raises ConfigurationError when missing)."""
        return resolve(self.name)

    def __repr__(self) -> str:
        return f"Secret({self.name!r})"

    __str__ = __repr__  # never the value: secrets must not leak into logs or prompts by accident

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("savegame.Secret", self.name))


def redact(state: Mapping[str, object], fields: Mapping[str, str]) -> dict[str, object]:
    """The state to save: declared secret fields replaced by references to their secret names."""
    out = dict(state)
    for key, name in fields.items():
        if key in out and out[key] is not None:
            out[key] = Secret(name)
    return out


def restore(state: Mapping[str, object], fields: Mapping[str, str]) -> dict[str, object]:
    """The state to run with: declared secret fields resolved from the provider again."""
    out = dict(state)
    for key, name in fields.items():
        if isinstance(out.get(key), Secret):
            out[key] = resolve(name)
    return out

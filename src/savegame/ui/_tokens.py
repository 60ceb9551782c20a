"""Who holds which token of the UI, and what a token may do: viewers read, approvers act.

A token is ``SECRET`` (the one shared token of older versions: role approver, name
``shared``) or ``NAME:ROLE=SECRET``. Roles follow Airflow's Viewer and Dagster's
``--read-only``: a *viewer* reads every page and makes no POST; an *approver* also
approves, rejects, answers, resolves, cancels, resumes and forks. Every decision an
approver makes is recorded with ``authenticated_as="ui-token:NAME"`` beside the name
the person typed (``by``): which token was used is what the server checked, the
name is what the person said.

Tokens come from ``--token`` (repeatable), else ``$SAVEGAME_UI_TOKEN`` (one), and from
a file (``--token-file``, else ``$SAVEGAME_UI_TOKEN_FILE``: one a line, ``#`` comments):
a file keeps the secrets out of the process list (a command line is readable by
every user of the machine, ``/proc/PID/cmdline``). A secret is never printed, logged
or shown: a token's ``repr`` leaves it out.

No starlette here: ``savegame.ui`` imports this without the ui extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from savegame.errors import ConfigurationError

Role = Literal["viewer", "approver"]
ROLES: tuple[Role, ...] = get_args(Role)
TOKEN_VAR = "SAVEGAME_UI_TOKEN"
TOKEN_FILE_VAR = "SAVEGAME_UI_TOKEN_FILE"
SHARED = "shared"
"""The name of a token given without one (``--token SECRET``)."""
MIN_SECRET = 16
#: ``NAME:ROLE=``: what makes a token a named one. A bare secret shaped like it (a word,
#: a colon, a word, an equals sign) would be ambiguous, so it is read as named and an
#: unknown role is refused rather than taken for part of a secret.
_NAMED = re.compile(
    r"(?P<name>[A-Za-z0-9._@-]{1,64}):(?P<role>[A-Za-z_-]*)=(?P<secret>.*)\Z", re.DOTALL
)


@dataclass(frozen=True, slots=True)
class UIToken:
    """A token the UI accepts: who holds it (``name``) and what it may do (``role``)."""

    name: str
    secret: str = field(repr=False)
    role: Role = "approver"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigurationError(
                f"UI token {self.name!r}: role {self.role!r} is not one of {', '.join(ROLES)}"
            )
        if len(self.secret) < MIN_SECRET:
            raise ConfigurationError(
                f"UI token {self.name!r}: the secret must be at least {MIN_SECRET} characters "
                "(try `savegame keygen`)"
            )


def parse_token(spec: str, where: str = "--token") -> UIToken:
    """``SECRET`` (name ``shared``, role approver) or ``NAME:ROLE=SECRET``.

    Raises:
        ConfigurationError: an unknown role or a short secret, naming ``where`` it was
            given (never the secret).
    """
    named = _NAMED.match(spec.strip())
    try:
        if named is None:
            return UIToken(SHARED, spec.strip())
        role = named["role"]
        if role not in ROLES:
            raise ConfigurationError(
                f"UI token {named['name']!r}: role {role!r} is not one of {', '.join(ROLES)} "
                "(write NAME:ROLE=SECRET)"
            )
        return UIToken(named["name"], named["secret"], role)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def read_token_file(path: Path | str) -> list[UIToken]:
    """The tokens of a file: one ``NAME:ROLE=SECRET`` (or ``SECRET``) a line; blank lines
    and lines starting with ``#`` are skipped.

    Raises:
        ConfigurationError: the file cannot be read, or a line is not a token (named by
            its number, never by its text).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the UI token file {path}: {exc.strerror}") from None
    return [
        parse_token(line, f"{path}, line {number}")
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def gather(
    token: str | None = None,
    tokens: Sequence[UIToken | str] = (),
    token_file: Path | str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
) -> tuple[UIToken, ...]:
    """Every token a server accepts: those given, else ``$SAVEGAME_UI_TOKEN``; those of
    ``token_file``, else of ``$SAVEGAME_UI_TOKEN_FILE`` (both read from ``environ``).

    Raises:
        ConfigurationError: a token is malformed, or two share a name or a secret (a
            request would not say which one it holds).
    """
    given = [t if isinstance(t, UIToken) else parse_token(t) for t in tokens]
    if token:
        given.append(parse_token(token))
    if not given and environ.get(TOKEN_VAR):
        given.append(parse_token(environ[TOKEN_VAR], f"${TOKEN_VAR}"))
    file = token_file or environ.get(TOKEN_FILE_VAR) or None
    if file is not None:
        given.extend(read_token_file(file))
    names, secrets = [t.name for t in given], [t.secret for t in given]
    twins = sorted({n for n in names if names.count(n) > 1})
    if twins:
        raise ConfigurationError(f"two UI tokens are named {twins[0]!r}: give each its own name")
    twins = [t.name for t in given if secrets.count(t.secret) > 1]
    if twins:
        raise ConfigurationError(
            f"UI tokens {', '.join(map(repr, twins))} have the same secret: give each its own"
        )
    return tuple(given)


@dataclass(frozen=True, slots=True)
class Access:
    """What one request may do: the token it carried (none on a UI without tokens) and
    whether the server is read-only."""

    name: str | None = None
    role: Role = "approver"
    read_only: bool = False

    @classmethod
    def of(cls, token: UIToken | None, *, read_only: bool) -> Access:
        if token is None:
            return cls(read_only=read_only)
        return cls(token.name, token.role, read_only)

    @property
    def may_act(self) -> bool:
        return not self.read_only and self.role == "approver"

    @property
    def authenticated_as(self) -> str | None:
        """What its decisions record beside ``by``; None: nothing was checked."""
        return None if self.name is None else f"ui-token:{self.name}"

    def refusal(self) -> str | None:
        """Why a POST is refused (None: it is not)."""
        if self.read_only:
            return (
                "refused: this savegame UI is read-only (savegame ui --read-only): "
                "it shows runs and records no decisions"
            )
        if not self.may_act:
            return (
                f"refused: the token {self.name!r} is a viewer's: it reads every page but "
                "cannot approve, reject, answer, resolve, cancel, resume or fork "
                "(an approver's token can)"
            )
        return None


def describe(tokens: Sequence[UIToken]) -> str:
    """The tokens by name and role, for the server's banner (no secret)."""
    return ", ".join(f"{t.name} ({t.role})" for t in tokens)

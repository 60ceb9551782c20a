"""Secrets leave every URL savegame shows: messages, ``Store.url``, logs, the UI.

A store URL carries a secret in three places: its userinfo (``postgresql://me:PW@host``),
a query parameter (``redis://host?password=PW``, libpq's ``?password=`` and
``sslpassword=``), and the userinfo of a URL given as a parameter's value
(``objects=s3://b&endpoint=http://KEY:PW@host``). :func:`redact_url` removes all three.
It reads the URL as text, as ``urllib`` and the drivers split it, and decodes nothing
first, so a value no driver can parse (a bad ``%`` escape) is removed all the same, and
it never raises: it runs on the URL a user typed wrong.

:func:`redact` is the one to call on a message: it redacts every URL in the text and,
given the URLs the message may concern, hides their secrets wherever else they appear,
since a driver's error may quote the value it refused (libpq: ``invalid percent-encoded
token: "PW%zz"``). Both are used by every store for ``Store.url`` and its errors, by the
CLI for every line it writes to stderr (errors, warnings, ``--debug`` tracebacks) and
every ``--store`` it suggests, and by the UI through ``Store.url``.

What is removed stays out, rather than shown as ``***``, in a URL: ``Store.url`` is
meant to be opened again (a PostgreSQL password then comes from ``PGPASSWORD`` or
``~/.pgpass``), and ``***`` would be taken for the password.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote, unquote, unquote_plus

__all__ = ["HIDDEN", "UNREADABLE", "redact", "redact_url"]

HIDDEN = "***"
"""What :func:`redact` writes where it hid a secret outside a URL."""
UNREADABLE = "(hidden: this URL does not parse)"
"""What follows the scheme of a URL whose password cannot be told from its host."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# A URL inside a message ends at whitespace or at a quote or bracket around it.
_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*")
# Query parameters whose value is a secret: libpq's password and sslpassword, redis-py's
# password, and the names services give tokens and keys. Not ``passfile`` or ``sslkey``:
# paths, which reopening Store.url needs.
_SECRET_PARAM = re.compile(
    r".*(password|passwd|secret|token|credential|signature).*"
    r"|pwd|pass|auth|authorization|api_?key|access_?key(_id)?|key|sig|sas",
)
# host, host:port, [v6]:port, and libpq's lists of them (h1:5432,h2:5433).
_HOST = r"(\[[^\]/?#@]*\]|[^:\[\]/?#@,]*)(:\d*)?"
_HOSTS = re.compile(f"{_HOST}(,{_HOST})*")
# libpq's other form, ``host=h password=PW``, which a driver may echo whole.
_KEYWORD_PASSWORD = re.compile(r"\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def redact_url(url: str) -> str:
    """``url`` without its secrets: the password of its userinfo (the user stays), every
    secret query parameter, and the whole userinfo of a URL in a parameter's value.

    A text that is not a URL (no ``scheme://``) is returned as it is.
    """
    return _redacted(url, keep_user=True)


def redact(text: str, *urls: str | None) -> str:
    """``text`` with every URL in it redacted (:func:`redact_url`) and every secret of
    ``urls`` elsewhere in it (a password a driver quoted) replaced by :data:`HIDDEN`."""
    secrets = sorted({s for url in urls if url for s in _secrets_of(url)}, key=len, reverse=True)
    pieces: list[str] = []
    done = 0
    for match in _IN_TEXT.finditer(text):
        # Punctuation after a URL ends the sentence, not the URL ("... at http://h:1: refused").
        url = match.group().rstrip(".,:;!?)]}")
        pieces.append(_hidden(text[done : match.start()], secrets))
        pieces.append(redact_url(url))
        done = match.start() + len(url)
    pieces.append(_hidden(text[done:], secrets))
    return "".join(pieces)


def _hidden(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + HIDDEN, text)


class _Parts:
    """A URL split as RFC 3986 (and ``urllib``) splits it, without decoding anything.

    A password that holds an unencoded ``/``, ``?`` or ``#`` ends the authority early
    for RFC 3986, while libpq reads on to the ``@``: such a URL is ``malformed``, and
    what is shown of it is its scheme alone.
    """

    def __init__(self, url: str) -> None:
        head = _SCHEME.match(url)
        self.head = head.group() if head else ""
        rest = url[len(self.head) :]
        end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
        authority = rest[:end]
        # Only an "@" before a URL given as a value (endpoint=http://k:pw@host) is ours.
        nested = rest.find("://")
        ours = rest if nested < 0 else rest[:nested]
        self.malformed = (
            bool(authority)
            and "@" not in authority
            and ("@" in ours[end:] or not _HOSTS.fullmatch(authority))
        )
        if self.malformed:
            authority = ours[: ours.rfind("@")] + "@" if "@" in ours else authority + "@"
        userinfo, at, self.host = authority.rpartition("@")
        self.user, _, self.password = userinfo.partition(":")
        self.has_userinfo = bool(at)
        # A store URL has no use for a fragment: a "#" in it is an unencoded "#" of a
        # password, and what follows may be the rest of that password.
        path_query = rest[end:].partition("#")[0]
        self.path, question, query = path_query.partition("?")
        self.params = [p.partition("=") for p in query.split("&")] if question else []


def _redacted(url: str, *, keep_user: bool) -> str:
    if not _SCHEME.match(url):
        return url
    parts = _Parts(url)
    if parts.malformed:
        return parts.head + UNREADABLE
    user = f"{parts.user}@" if parts.has_userinfo and keep_user and parts.user else ""
    kept: list[str] = []
    for name, eq, value in parts.params:
        if _is_secret(name):
            continue
        inner = unquote_plus(value)
        if _SCHEME.match(inner):
            cleaned = _redacted(inner, keep_user=False)
            if cleaned != inner:
                value = quote(cleaned, safe=":/")
        kept.append(name + eq + value)
    query = "?" + "&".join(kept) if kept else ""
    return parts.head + user + parts.host + parts.path + query


def _is_secret(name: str) -> bool:
    return bool(_SECRET_PARAM.fullmatch(unquote_plus(name).lower().replace("-", "_")))


def _secrets_of(url: str) -> Iterator[str]:
    """Each secret of ``url`` as it was given and as a driver decodes it, except one that
    is also the user name (``postgres:postgres@``): the URL shows that name anyway."""
    text = url.partition("=")[2] if url.startswith("-") else url  # --store=URL
    if not _SCHEME.match(text):
        return
    parts = _Parts(text)
    # libpq ends a password at its first "@" (or, in a malformed URL, at a "/") and
    # quotes what it read: each piece is a secret too, but not one of a character or
    # two, which would be hidden in every word of the message and guard nothing.
    pieces = [p for p in re.split(r"[@/?#:]", parts.password) if len(p) > 2]
    found = [parts.password, unquote(parts.password), *pieces]
    for name, _, value in parts.params:
        inner = unquote_plus(value)
        if _is_secret(name):
            found += [value, inner]
        elif _SCHEME.match(inner):
            found += _secrets_of(inner)
    user = {parts.user, unquote(parts.user)}
    yield from (s for s in found if s and s not in user)

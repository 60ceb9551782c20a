"""Who may talk to the UI, and what a page may do in the browser.

The UI shows states and journals (what agents read and wrote) and can approve,
reject and cancel, so every request passes these checks before a page runs:

* **Binding.** :func:`check_bind` refuses a host that is not loopback unless a token
  is set: the UI is reachable only from this machine by default.
* **Host header.** A request must name one of the hosts the server was bound to
  (``127.0.0.1:8765``, ``localhost:8765`` ...): a web page elsewhere that points a DNS
  name of its own at 127.0.0.1 (DNS rebinding) is refused, so it cannot read pages.
* **Token.** With tokens, a request carries one (``Authorization: Bearer``, or the
  cookie the login link ``/?token=...`` sets, which holds a digest of it, never the
  token itself); without one the answer is 401 and shows nothing of the store. The
  token found names the request's :class:`~savegame.ui._tokens.Access` (its name and
  role), which pages read to show or hide actions and decisions record.
* **Role.** A state-changing request (POST) is refused (403, naming why) on a
  read-only server and for a viewer's token, before anything else reads it.
* **CSRF.** A state-changing request (POST) must carry the page's CSRF token (a form
  field or the ``X-CSRF-Token`` header htmx sends) equal to the browser's ``sg_csrf``
  cookie, and its ``Origin`` (when the browser sends one) must be the UI's own.
  The cookies are ``SameSite=Strict``: another site's form never sends them.
* **Headers.** Every answer forbids inline scripts and styles, framing and sniffing
  (Content-Security-Policy), so even a value that escaped escaping could not run.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from savegame.errors import ConfigurationError
from savegame.ui._tokens import Access, UIToken

TOKEN_COOKIE = "sg_token"
CSRF_COOKIE = "sg_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # same-origin, not no-referrer: under no-referrer a form POST says `Origin: null`.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: tuple[UIToken, ...]) -> None:
    """Refuse to serve on a host other machines can reach without a token (read-only
    too: the pages show states and journals).

    Raises:
        ConfigurationError: ``host`` is not loopback and no token is set.
    """
    if not is_loopback(host) and not tokens:
        raise ConfigurationError(
            f"savegame ui on {host!r} is reachable from other machines: give it a token "
            "(--token, --token-file, SAVEGAME_UI_TOKEN), or bind 127.0.0.1"
        )


def _digest(token: str) -> str:
    return hashlib.sha256(b"savegame-ui:" + token.encode()).hexdigest()


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


@dataclass(frozen=True)
class Guard:
    """The checks of one server: its tokens, the host names it answers to, its mode."""

    port: int
    tokens: tuple[UIToken, ...] = ()
    hosts: frozenset[str] | None = frozenset({"127.0.0.1", "localhost", "[::1]"})
    """The names a Host header may give (with or without the port); None: any (a server
    with a token, where a page of another site has no token to send)."""
    read_only: bool = False
    """Every POST is refused (the app mounts no action either)."""
    _digests: tuple[tuple[str, UIToken], ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_digests", tuple((_digest(t.secret), t) for t in self.tokens))

    def _holder(self, secret: str | None = None, digest: str | None = None) -> UIToken | None:
        """The token whose secret (or digest) is given; every one is compared, in
        constant time each, so the time taken does not say which came close."""
        wanted = _digest(secret) if secret is not None else digest
        found = None
        for known, token in self._digests:
            if _same(wanted, known):
                found = token
        return found

    def _host_ok(self, request: Request) -> bool:
        if self.hosts is None:
            return True
        given = request.headers.get("host", "")
        return given in self.hosts or given in {f"{h}:{self.port}" for h in self.hosts}

    def _carried(self, request: Request) -> UIToken | None:
        """The token the request carries (a Bearer header, else the login cookie)."""
        bearer = request.headers.get("authorization", "")
        found = self._holder(secret=bearer[7:]) if bearer.startswith("Bearer ") else None
        return found or self._holder(digest=request.cookies.get(TOKEN_COOKIE))

    def _csrf_ok(self, request: Request, form_token: str | None) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE)
        given = request.headers.get(CSRF_HEADER) or form_token
        if not cookie or not _same(given, cookie):
            return False
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        return origin is None or origin == own

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._checked(request, call_next)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        if CSRF_COOKIE not in request.cookies:
            response.set_cookie(
                CSRF_COOKIE, request.state.csrf, httponly=True, samesite="strict", path="/"
            )
        return response

    async def _checked(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request.state.csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        if not self._host_ok(request):
            return PlainTextResponse(
                "unexpected Host header: this UI answers to its own address only", 400
            )
        login = request.query_params.get("token")
        if self.tokens and login is not None and request.method == "GET":
            if self._holder(secret=login) is None:
                return PlainTextResponse("wrong token", 401)
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            # The path as sent: request.url's is decoded, and a run id's quoted "/"
            # (x%2F..%2Fvictim) would come back as a path a browser resolves elsewhere.
            sent = request.scope.get("raw_path") or request.url.path.encode()
            target = sent.decode("latin-1") + (f"?{urlencode(rest)}" if rest else "")
            done = RedirectResponse(target, 303)
            done.set_cookie(
                TOKEN_COOKIE, _digest(login), httponly=True, samesite="strict", path="/"
            )
            return done
        holder = self._carried(request) if self.tokens else None
        if self.tokens and holder is None:
            return PlainTextResponse(
                "this savegame UI needs its token: open /?token=<your token> once (it sets a "
                "cookie), or send Authorization: Bearer <token>",
                401,
            )
        request.state.access = access = Access.of(holder, read_only=self.read_only)
        if request.method in UNSAFE:
            refused = access.refusal()
            if refused is not None:
                return PlainTextResponse(refused, 403)
            form_token = None
            if request.headers.get(CSRF_HEADER) is None:
                form_token = (await form_of(request)).get(CSRF_FIELD)
            if not self._csrf_ok(request, form_token):
                return PlainTextResponse(
                    "refused: this request did not come from a page of this UI (CSRF check); "
                    "reload the page and try again",
                    403,
                )
        return await call_next(request)


async def form_of(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, read once (kept on the request).

    Parsed with the standard library: the forms here are small and flat, so the UI
    needs no multipart parser.
    """
    cached: dict[str, str] | None = getattr(request.state, "form", None)
    if cached is not None:
        return cached
    from urllib.parse import parse_qsl

    body = (await request.body())[:1_000_000].decode("utf-8", "replace")
    form = dict(parse_qsl(body, keep_blank_values=True))
    request.state.form = form
    return form

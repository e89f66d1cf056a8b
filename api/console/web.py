"""What every console page shares: templates, the session cookie, the CSRF check, action answers and audit.

Pages need a session (else a redirect to the sign-in form); a POST needs a session, the
session's CSRF token (form field ``csrf_token`` or header ``X-CSRF-Token``) and, for actions, an
operator key (the Keys page and its actions: an admin key). An action answers JSON to the page's
script (``Accept: application/json``) and a redirect with a notice to a plain form post, so every page
also works without JavaScript.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from ipaddress import ip_address
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from api.console.sessions import Session, SessionPolicy, session_for
from api.errors import SignInRequired, console_message, status_of
from api.headers import ctx_of, request_id_of
from config.clock import ensure_utc
from config.errors import KickoffError
from config.public_text import public_text
from models.audit import AuditContext

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_PORTS = {"http": 80, "https": 443}
COOKIE = "kickoff_console"
#: The cookie when Secure: with ``__Host-`` a browser refuses it without Secure, with a Domain or other Path.
SECURE_COOKIE = "__Host-kickoff_console"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
#: What a stream or a post without a live session is told.
SIGN_IN_FIRST = "sign in to the console first"

templates = Jinja2Templates(directory=str(PACKAGE_DIR / "templates"))

#: Every page: never framed by another site (clickjacking), never cached (it carries the CSRF token);
#: scripts, styles, images and connections from this origin only, none inline (static/ holds them).
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
}


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _utc(value: datetime | str | None, fmt: str) -> str:
    """``value`` (a time or its ISO 8601 text) in UTC as ``fmt``; ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return ensure_utc(value, what="time").strftime(fmt)


def _when(value: datetime | str | None) -> str:
    return _utc(value, "%Y-%m-%d %H:%M:%S UTC")


def _duration(start: datetime | str | None, end: datetime | str | None) -> str:
    if start is None or end is None:
        return "-"
    start = datetime.fromisoformat(start) if isinstance(start, str) else start
    end = datetime.fromisoformat(end) if isinstance(end, str) else end
    return _age((end - start).total_seconds())


def _trace_link(trace_id: str | None, url_template: str | None = None) -> Markup:
    """A trace id: a link to TRACE_URL_TEMPLATE's page of it when one is set, else the id; ``-``: none."""
    if not trace_id:
        return Markup("-")
    if url_template:
        href = url_template.replace("{trace_id}", trace_id)
        return Markup('<a class="trace-id" href="{}" rel="noopener noreferrer">{}</a>').format(href, trace_id)
    return Markup('<code class="trace-id">{}</code>').format(trace_id)


templates.env.globals["trace_link"] = _trace_link


def _minute(value: datetime | str | None) -> str:
    """A time to the minute, UTC (the boards' compact cells; the header says UTC)."""
    return _utc(value, "%Y-%m-%d %H:%M")


templates.env.filters["age"] = _age
templates.env.filters["public"] = public_text  # a stored error as a caller reads it (no address, no path)
templates.env.filters["minute"] = _minute
templates.env.filters["when"] = _when
templates.env.globals["duration"] = _duration


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of ``url`` (default ports filled in), or None when it has none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme)


def request_origin(request: Request) -> str:
    """``scheme://host:port`` of ``request`` (after --proxy-headers): the origin a session is bound to."""
    return _text(_origin(str(request.url)))


def cross_origin(request: Request) -> str | None:
    """Why a post (the sign-in, any console post) is not from this console's own pages, or None when
    it is (or cannot tell). Another port of the same host is another origin.

    ``Origin`` decides; without it, ``Referer``; a client that sends neither (not a browser: a
    browser sends Origin with every POST) passes, since it cannot carry another site's post.
    """
    presented = request.headers.get("origin")
    what = "Origin"
    if presented is None:
        presented, what = request.headers.get("referer"), "Referer"
        if presented is None:
            return None
    own, theirs = _origin(str(request.url)), _origin(presented)
    if own is None or theirs != own:
        hint = ""
        if own and theirs and theirs[0] == "https" and own[0] == "http" and theirs[1] == own[1]:
            hint = " (behind a TLS proxy? serve with --proxy-headers, API_TRUSTED_PROXIES)"
        return f"{what} {presented[:100]!r} is not this console's origin {_text(own)}{hint}"
    return None


def _text(origin: tuple[str, str, int | None] | None) -> str:
    return f"{origin[0]}://{origin[1]}:{origin[2]}" if origin else "(unknown)"


def plain_localhost(request: Request) -> bool:
    """Whether ``request`` came over plain HTTP to a loopback address of this server.

    The scheme is the connection's, or X-Forwarded-Proto's when `kickoff serve --proxy-headers`
    trusts the proxy; the address is the server's end of the connection (not the Host header).
    """
    server = request.scope.get("server")
    if request.url.scheme != "http" or not server or not isinstance(server[0], str):
        return False
    host = server[0].strip("[]")
    if host == "localhost":
        return True
    try:
        address = ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def secure_cookie(request: Request) -> bool:
    """Whether the session cookie is ``__Host-kickoff_console`` and Secure for ``request``."""
    return ctx_of(request).settings.console_cookie_secure or not plain_localhost(request)


def cookie_name(request: Request) -> str:
    """``__Host-kickoff_console`` when Secure; on plain localhost ``kickoff_console_<port>``: cookies are
    not port-scoped, so the name keeps consoles on other ports of the host from overwriting it."""
    if secure_cookie(request):
        return SECURE_COOKIE
    server = request.scope.get("server")
    return f"{COOKIE}_{server[1]}" if server and server[1] else COOKIE


def session_token(request: Request) -> str | None:
    """The session cookie's token (only the ``__Host-`` one unless served on plain localhost)."""
    return request.cookies.get(cookie_name(request))


def set_session_cookie(answer: Response, request: Request, token: str) -> None:
    """Set the cookie: HttpOnly, SameSite=Strict, Path=/; Secure and ``__Host-`` unless plain localhost."""
    answer.set_cookie(
        cookie_name(request),
        token,
        max_age=int(ctx_of(request).settings.console_session_hours * 3600),
        path="/",
        httponly=True,
        samesite="strict",
        secure=secure_cookie(request),
    )


def clear_session_cookie(answer: Response, request: Request) -> None:
    answer.delete_cookie(
        cookie_name(request), path="/", httponly=True, samesite="strict", secure=secure_cookie(request)
    )


def session_policy(request: Request) -> SessionPolicy:
    return SessionPolicy.from_settings(ctx_of(request).settings)


async def session_of(request: Request, *, touch: bool = True) -> Session | None:
    """The live session of ``request``'s cookie (``touch``: it counts as used now), or None."""
    idle, origin = session_policy(request).idle, request_origin(request)
    return await run_in_threadpool(
        lambda: session_for(session_token(request), idle=idle, touch=touch, origin=origin)
    )


#: The only console paths a session of a key limited to leagues may use: its leagues' board, the
#: board's live stream, and signing out. Every other page shows or acts on every league.
LIMITED_SESSION_PATHS = frozenset({"/", "/events/board", "/sign-out"})


async def _live_session(request: Request, refused: Exception) -> Session:
    """The live session of ``request``, else ``refused`` raised; a session of a key limited to leagues
    outside LIMITED_SESSION_PATHS is 403."""
    session = await session_of(request)
    if session is None:
        raise refused
    if session.limited and request.url.path not in LIMITED_SESSION_PATHS:
        raise HTTPException(
            status_code=403,
            detail=f"key {session.key_name!r} is limited to league(s) {', '.join(session.leagues or ())}: "
            "the console shows it only its leagues' listener board",
        )
    return session


async def page_session(request: Request) -> Session:
    """Dependency of every console page: the live session, else a redirect to the sign-in form."""
    back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    session = await _live_session(request, SignInRequired(back))
    request.state.console_session = session
    return session


async def stream_session(request: Request) -> Session:
    """Dependency of the live board's stream: the live session, else 401 (a stream is not redirected)."""
    session = await _live_session(request, HTTPException(status_code=401, detail=SIGN_IN_FIRST))
    request.state.console_session = session
    return session


async def _posted_session(request: Request) -> Session:
    foreign = cross_origin(request)
    if foreign is not None:  # another site, or another port of this host: never a console post
        logger.warning("console post %s refused: %s", request.url.path, foreign)
        raise HTTPException(status_code=403, detail="this post came from another site or port")
    session = await _live_session(request, HTTPException(status_code=403, detail=SIGN_IN_FIRST))
    presented = request.headers.get(CSRF_HEADER)
    if presented is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        presented = value if isinstance(value, str) else None
    if not session.csrf_ok(presented):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token: reload the page")
    request.state.console_session = session
    return session


async def post_session(request: Request) -> Session:
    """Dependency of a state-changing request any session may make (sign-out): session and CSRF token."""
    return await _posted_session(request)


async def operator_session(request: Request) -> Session:
    """Dependency of an action: session, CSRF token, and an operator key (a read session is 403)."""
    session = await _posted_session(request)
    if not session.can_act:
        raise HTTPException(status_code=403, detail="a read key cannot act: sign in with an operator key")
    return session


async def admin_page_session(request: Request) -> Session:
    """Dependency of an admin page (Keys): the live session (else the sign-in redirect), of an admin key."""
    session = await page_session(request)
    if not session.is_admin:
        raise HTTPException(status_code=403, detail="only an admin key manages API keys")
    return session


async def admin_session(request: Request) -> Session:
    """Dependency of an admin action (create, revoke a key): session, CSRF token, and an admin key."""
    session = await _posted_session(request)
    if not session.is_admin:
        raise HTTPException(status_code=403, detail="only an admin key manages API keys")
    return session


#: Route parameters: the page's session; a post's session (CSRF checked); an action's (operator too).
PageSession = Annotated[Session, Depends(page_session)]
StreamSession = Annotated[Session, Depends(stream_session)]
PostSession = Annotated[Session, Depends(post_session)]
OperatorSession = Annotated[Session, Depends(operator_session)]
AdminPageSession = Annotated[Session, Depends(admin_page_session)]
AdminSession = Annotated[Session, Depends(admin_session)]


def session_audit(request: Request, session: Session, reason: str | None = None) -> AuditContext:
    """What a console act is audited with: the session's API key, ``reason`` and the request id."""
    return AuditContext(session.actor, reason=reason, request_id=request_id_of(request))


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """Render ``template`` with the session, its CSRF token and the page's notice."""
    session: Session | None = getattr(request.state, "console_session", None)
    context.setdefault("notice", request.query_params.get("notice"))
    context.setdefault("notice_kind", request.query_params.get("kind", "ok"))
    context.setdefault("trace_url", ctx_of(request).settings.trace_url_template)
    return templates.TemplateResponse(
        request,
        template,
        {"session": session, "csrf_token": session.csrf_token if session else "", **context},
        status_code=status_code,
        headers=PAGE_HEADERS,
    )


def safe_next(value: str | None, default: str = "/") -> str:
    """A local path to go back to (anything else, e.g. ``//host``, becomes ``default``)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def with_notice(path: str, message: str, *, ok: bool) -> str:
    joiner = "&" if "?" in path else "?"
    return f"{path}{joiner}{urlencode({'notice': message, 'kind': 'ok' if ok else 'error'})}"


async def act(request: Request, call: Callable[[], str], *, back: str = "/", **extra: Any) -> Response:
    """Run an action (a library call returning the sentence to show) and answer page or script.

    A KickoffError is shown as the notice (its message and what its kind means, api.errors.NOTICE_OF),
    with the status the API gives it.
    """
    form = await request.form()
    value = form.get("next")
    back = safe_next(value if isinstance(value, str) else None, back)
    try:
        message = await run_in_threadpool(call)
        ok, status = True, 200
    except KickoffError as exc:
        message, ok, status = console_message(exc), False, status_of(exc)
        logger.info("console action %s refused (%s): %s", request.url.path, status, exc)
    if wants_json(request):
        return JSONResponse({"ok": ok, "message": message, **extra}, status_code=status)
    return RedirectResponse(with_notice(back, message, ok=ok), status_code=303)

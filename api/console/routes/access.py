"""Sign-in with an API key, sign-out, and the console's CSS and script."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.sessions import sign_in, sign_out
from api.console.throttle import WINDOW_SECONDS, SignInThrottle
from api.console.web import (
    PACKAGE_DIR,
    PostSession,
    clear_session_cookie,
    cross_origin,
    render,
    request_origin,
    safe_next,
    session_audit,
    session_policy,
    session_token,
    set_session_cookie,
)
from api.errors import SignInRefused
from api.headers import ctx_of, request_id_of
from config.errors import NotFound

logger = logging.getLogger(__name__)

router = APIRouter(include_in_schema=False)

#: The files under api/console/static the pages link to (nothing else is served).
STATIC = {
    "console.css": "text/css",
    "console.js": "text/javascript",
    # uPlot (the charts; MIT, its licence beside it), vendored from the npm registry: no CDN
    "uPlot.iife.min.js": "text/javascript",
    "uPlot.min.css": "text/css",
    "uPlot.LICENSE.txt": "text/plain",
}


@router.get("/sign-in", dependencies=[requires(Need.PUBLIC)])
def sign_in_form(request: Request, next: str = "/") -> Response:
    """The sign-in form: one field labelled "API key"."""
    return render(request, "sign_in.html", next=safe_next(next), error=None)


def client_address(request: Request) -> str:
    """The client's address (X-Forwarded-For's when `kickoff serve --proxy-headers` trusts the proxy)."""
    return request.client.host if request.client else "unknown"


@router.post("/sign-in", dependencies=[requires(Need.PUBLIC)])
async def sign_in_post(request: Request, api_key: str = Form(""), next: str = Form("/")) -> Response:
    """Open a session for a read or operator key; the form again with the reason otherwise.

    Refused: a post from another site (403), a key (or, behind a trusted proxy, a client address)
    past its refused sign-ins of the minute, those being checked included (429, before the key is
    looked at: api.console.throttle), an unknown, revoked or trigger key (401).
    """
    settings = ctx_of(request).settings
    throttle: SignInThrottle = request.app.state.sign_in_throttle
    address = client_address(request)
    buckets = throttle.buckets(api_key, address)
    foreign = cross_origin(request)
    if foreign is not None:
        logger.warning("console sign-in from %s refused: %s", address, foreign)
        return render(
            request,
            "sign_in.html",
            status_code=403,
            next=safe_next(next),
            error="sign in from the console's own sign-in page (this form came from another site)",
        )
    wait = await run_in_threadpool(throttle.admit, buckets)
    if wait is not None:
        answer = render(
            request,
            "sign_in.html",
            status_code=429,
            next=safe_next(next),
            error=f"too many refused sign-ins with this key or from this address: try again in {wait} s",
        )
        answer.headers["Retry-After"] = str(wait)
        return answer
    try:
        _session, token = await run_in_threadpool(
            sign_in,
            api_key,
            policy=session_policy(request),
            address=address,
            request_id=request_id_of(request),
            origin=request_origin(request),
        )
    except BaseException as exc:
        if not isinstance(exc, SignInRefused):
            throttle.passed(buckets)  # not a refusal (e.g. PostgreSQL down): not counted
            raise
        count = await run_in_threadpool(throttle.refused, buckets)
        limit = settings.console_sign_in_failures_per_minute
        held = f"; its sign-ins answer 429 for up to {WINDOW_SECONDS:.0f} s" if count >= limit else ""
        logger.warning(
            "console sign-in from %s refused (%s, %s/%s in a minute%s): %s",
            address,
            buckets[0],
            count,
            limit,
            held,
            exc,
        )
        return render(request, "sign_in.html", status_code=401, next=safe_next(next), error=str(exc))
    throttle.passed(buckets)
    answer = RedirectResponse(safe_next(next), status_code=303)
    set_session_cookie(answer, request, token)
    return answer


@router.post("/sign-out", dependencies=[requires(Need.CONSOLE)])
async def sign_out_post(request: Request, session: PostSession) -> Response:
    """End the session (its row is deleted) and clear the cookie."""
    await run_in_threadpool(
        sign_out,
        session_token(request),
        audit=session_audit(request, session),
        address=client_address(request),
    )
    answer = RedirectResponse("/sign-in", status_code=303)
    clear_session_cookie(answer, request)
    return answer


@router.get("/static/{name}", dependencies=[requires(Need.PUBLIC)])
def static(name: str) -> Response:
    """console.css or console.js."""
    if name not in STATIC:
        raise NotFound(f"no console file {name!r}")
    return FileResponse(PACKAGE_DIR / "static" / name, media_type=STATIC[name])

"""Sign-in with an API key, sign-out, and the console's CSS and script."""

from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from api.console.sessions import sign_in, sign_out
from api.console.web import (
    COOKIE,
    PACKAGE_DIR,
    PostSession,
    render,
    safe_next,
    session_lifetime,
    session_token,
)
from api.headers import ctx_of
from config.errors import NotFound, SignInRefused

router = APIRouter(include_in_schema=False)

#: The files under api/console/static the pages link to (nothing else is served).
STATIC = {"console.css": "text/css", "console.js": "text/javascript"}


@router.get("/sign-in")
def sign_in_form(request: Request, next: str = "/") -> Response:
    """The sign-in form: one field labelled "API key"."""
    return render(request, "sign_in.html", next=safe_next(next), error=None)


@router.post("/sign-in")
async def sign_in_post(request: Request, api_key: str = Form(""), next: str = Form("/")) -> Response:
    """Open a session for a read or operator key; the form again with the reason otherwise."""
    settings = ctx_of(request).settings
    try:
        _session, token = await run_in_threadpool(
            sign_in, api_key, lifetime=session_lifetime(settings.console_session_hours)
        )
    except SignInRefused as exc:
        return render(request, "sign_in.html", status_code=401, next=safe_next(next), error=str(exc))
    answer = RedirectResponse(safe_next(next), status_code=303)
    answer.set_cookie(
        COOKIE,
        token,
        max_age=int(settings.console_session_hours * 3600),
        path="/",
        httponly=True,
        samesite="strict",
        secure=settings.console_cookie_secure,
    )
    return answer


@router.post("/sign-out")
async def sign_out_post(request: Request, _session: PostSession) -> Response:
    """End the session (its row is deleted) and clear the cookie."""
    await run_in_threadpool(sign_out, session_token(request))
    answer = RedirectResponse("/sign-in", status_code=303)
    answer.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return answer


@router.get("/static/{name}")
def static(name: str) -> Response:
    """console.css or console.js."""
    if name not in STATIC:
        raise NotFound(f"no console file {name!r}")
    return FileResponse(PACKAGE_DIR / "static" / name, media_type=STATIC[name])

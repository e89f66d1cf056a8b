"""The Keys page (/keys, admin keys only): list, create (the key shown once, in the answer), revoke keys."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.web import AdminPageSession, AdminSession, act, render, session_audit, wants_json
from api.errors import public_message, status_of
from api.keys import Scope, create_key, list_keys, revoke_key
from config.errors import KickoffError
from config.text_rule import checked_reason, checked_text
from publisher.errors import TriggerValidationError

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: The scopes the form offers, narrowest first.
SCOPES = (Scope.READ, Scope.TRIGGER, Scope.OPERATOR, Scope.ADMIN)


def _page(request: Request, status_code: int = 200, **context: object) -> Response:
    return render(request, "keys.html", status_code, keys=list_keys(), scopes=SCOPES, here="/keys", **context)


@router.get("/keys")
def keys_page(request: Request, session: AdminPageSession) -> Response:
    """Every key (name, scope, leagues, created, revoked), the create form, a Revoke button per live key."""
    return _page(request)


@router.post("/keys")
async def keys_create(request: Request, session: AdminSession) -> Response:
    """Create a key (as `kickoff apikeys create`): form fields name, scope, leagues (comma-separated,
    optional) and reason. The answer is the page itself with the key shown once (never a redirect:
    the key stays out of URLs)."""
    form = await request.form()
    name, scope, leagues, reason = (
        str(form.get(f, "")).strip() for f in ("name", "scope", "leagues", "reason")
    )

    def call() -> tuple[str, str]:
        if not name:
            raise TriggerValidationError("name", "must not be empty")
        checked_text(name, field="name", max_length=200)
        why = checked_reason(reason, required=False)
        try:
            chosen = Scope(scope)
        except ValueError as exc:
            raise TriggerValidationError("scope", f"must be one of {[s.value for s in SCOPES]}") from exc
        key, secret = create_key(
            name=name,
            scope=chosen,
            leagues=[x.strip() for x in leagues.split(",") if x.strip()] or None,
            audit=session_audit(request, session, why),
        )
        return key.id, secret

    try:
        key_id, secret = await run_in_threadpool(call)
    except KickoffError as exc:
        message, status = public_message(exc), status_of(exc)
        if wants_json(request):
            return JSONResponse({"ok": False, "message": message}, status_code=status)
        return await run_in_threadpool(lambda: _page(request, status, notice=message, notice_kind="error"))
    if wants_json(request):
        return JSONResponse({"ok": True, "message": f"key {key_id} created", "id": key_id, "key": secret})
    return await run_in_threadpool(
        lambda: _page(
            request, created={"id": key_id, "name": name, "key": secret}, notice=f"key {name} created"
        )
    )


@router.post("/keys/{key_id}/revoke")
async def keys_revoke(key_id: str, request: Request, session: AdminSession) -> Response:
    """Revoke one key (as `kickoff apikeys revoke`); its sessions end with it. Optional form field reason."""
    form = await request.form()
    reason = str(form.get("reason", "")).strip() or None

    def call() -> str:
        key = revoke_key(
            key_id, audit=session_audit(request, session, checked_reason(reason, required=False))
        )
        request.app.state.key_cache.forget(key.id)
        return f"revoked {key.id} ({key.name})"

    return await act(request, call, back="/keys")

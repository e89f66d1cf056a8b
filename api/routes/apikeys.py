"""/v1/apikeys: list, create (the key shown once) and revoke API keys; admin keys only, each act audited."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from api.auth import Need, requires
from api.errors import error_responses
from api.headers import audit_of
from api.keys import ApiKey, Scope, create_key, list_keys, revoke_key
from api.schemas import MAX_TEXT_LENGTH, NON_BLANK, ApiKeyBody, PathId

router = APIRouter(prefix="/v1/apikeys", tags=["apikeys"])


def key_json(key: ApiKey) -> dict[str, Any]:
    """A key as the API and `kickoff apikeys list --json` show it (never the key itself)."""
    return {
        "id": key.id,
        "name": key.name,
        "scope": key.scope.value,
        "leagues": None if key.leagues is None else list(key.leagues),
        "created_at": key.created_at.isoformat(),
        "revoked": key.revoked_at is not None,
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }


@router.get("", dependencies=[requires(Need.ADMIN)])
def list_apikeys() -> dict[str, Any]:
    """Every key, oldest first, revoked ones included: ``{"count", "keys": [{"id", "name", "scope",
    "leagues", "created_at", "revoked", "revoked_at"}]}`` (as `kickoff apikeys list --json`)."""
    keys = [key_json(k) for k in list_keys()]
    return {"count": len(keys), "keys": keys}


@router.post("", dependencies=[requires(Need.ADMIN)], status_code=201, responses=error_responses(409))
def create_apikey(body: ApiKeyBody, request: Request) -> JSONResponse:
    """Create a key (audited as apikey.create): 201 with the key's fields and ``key``, its secret,
    shown this once (only its SHA-256 is stored); 409 when another key has the name (any case); 422
    a name with ``@`` (the CLI's ``user@host`` form)."""
    key, secret = create_key(
        name=body.name.strip(),
        scope=Scope(body.scope),
        leagues=body.leagues,
        audit=audit_of(request, body.reason),
    )
    return JSONResponse({**key_json(key), "key": secret}, status_code=201)


@router.delete("/{key_id}", dependencies=[requires(Need.ADMIN)])
def revoke_apikey(
    key_id: PathId,
    request: Request,
    reason: str | None = Query(
        None,
        min_length=1,
        max_length=MAX_TEXT_LENGTH,
        pattern=NON_BLANK,
        description="Why (optional; kept in the audit log).",
    ),
) -> dict[str, Any]:
    """Revoke a key at once (audited as apikey.revoke; idempotent): the key; 404 if unknown. Its row stays."""
    key = revoke_key(key_id, audit=audit_of(request, reason))
    request.app.state.key_cache.forget(key.id)
    return key_json(key)

"""GET /v1/actions/{tracking_id} and POST .../result: an action's delivery and verification, its result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.auth import LeagueFrom, Need, may_act_for, reads_league, requires
from api.errors import error_responses
from api.headers import audit_of
from api.schemas import ActionResultBody, PathId
from config.errors import Forbidden
from config.public_text import public_text
from publisher.actions import action_not_found, creator_key_of
from publisher.results import action_state, report_result

router = APIRouter(prefix="/v1/actions", tags=["actions"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value.isoformat() if hasattr(value, "isoformat") else value


def public_action(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (action_state) with its stored errors as a caller reads them (config.public_text)."""
    out = {**state, "error": public_text(state.get("error"))}
    if out.get("delivery"):
        out["delivery"] = {**out["delivery"], "last_error": public_text(out["delivery"].get("last_error"))}
    if out.get("verification", {}).get("reason"):
        out["verification"] = {**out["verification"], "reason": public_text(out["verification"]["reason"])}
    return out


@router.get("/{tracking_id}", dependencies=[requires(Need.READ)])
def show_action(tracking_id: PathId, request: Request) -> dict[str, Any]:
    """The action with its delivery (outbox message) and verification state (`kickoff actions show`);
    ``created_by`` names the API key that created it (``{"key_id", "name"}``; null: made on the box);
    404 for an action of a league the key is not limited to."""
    state = action_state(tracking_id)
    if not reads_league(request, state.get("league_id")):
        raise action_not_found(tracking_id)
    return _jsonable(public_action(state))


@router.post(
    "/{tracking_id}/result",
    dependencies=[requires(Need.TRIGGER, league=LeagueFrom.ACTION)],
    status_code=202,
    responses=error_responses(409),
)
async def report(tracking_id: PathId, body: ActionResultBody, request: Request) -> JSONResponse:
    """Report the consumer's result into execution_log (`kickoff actions result`); verified later.

    202 ``reported``; a repeat before verification (or after the verification set it aside) replaces it;
    409 once settled (verified or failed); 404 unknown; 403 when the action was created by another key
    (only that key, or an operator or admin key, reports it).
    """
    key = request.state.api_key
    creator = await run_in_threadpool(creator_key_of, tracking_id)
    if not may_act_for(key, creator):
        raise Forbidden(
            f"action {tracking_id} was created by another API key: only that key, or an operator or admin"
            " key, may report its result"
        )
    audit = audit_of(request)
    out = await run_in_threadpool(
        lambda: report_result(
            tracking_id,
            outcome=body.outcome,
            details=body.details,
            reported_by=body.reported_by,
            audit=audit,
        )
    )
    return JSONResponse(out, status_code=202)

"""GET /v1/actions/{tracking_id} and POST .../result: an action's delivery and verification, its result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.auth import LeagueFrom, Need, may_act_for, requires
from api.errors import error_responses
from api.headers import audit_of
from api.schemas import ActionResultBody, PathId
from config.errors import Forbidden
from publisher.actions import action_row
from publisher.results import action_state, report_result
from publisher.sql import actions as action_sql

router = APIRouter(prefix="/v1/actions", tags=["actions"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value.isoformat() if hasattr(value, "isoformat") else value


@router.get("/{tracking_id}", dependencies=[requires(Need.READ)])
def show_action(tracking_id: PathId) -> dict[str, Any]:
    """The action with its delivery (outbox message) and verification state (`kickoff actions show`);
    ``created_by`` names the API key that created it (``{"key_id", "name"}``; null: made on the box)."""
    return _jsonable(action_state(tracking_id))


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
    (creator,) = await run_in_threadpool(action_row, action_sql.SELECT_CREATOR, tracking_id)
    if not may_act_for(key, creator):
        raise Forbidden(
            f"action {tracking_id} was created by another API key: only that key, or an operator or admin"
            " key, may report its result"
        )
    await run_in_threadpool(
        lambda: audit_of(request).record(
            "action.result",
            "action",
            tracking_id,
            after={"outcome": body.outcome, "reported_by": body.reported_by},
        )
    )
    out = await run_in_threadpool(
        lambda: report_result(
            tracking_id, outcome=body.outcome, details=body.details, reported_by=body.reported_by
        )
    )
    return JSONResponse(out, status_code=202)

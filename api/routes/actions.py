"""GET /v1/actions/{tracking_id} and POST .../result: an action's delivery and verification, its result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.errors import error_responses
from api.schemas import ActionResultBody, PathId
from publisher.results import action_state, report_result

router = APIRouter(prefix="/v1/actions", tags=["actions"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value.isoformat() if hasattr(value, "isoformat") else value


@router.get("/{tracking_id}")
def show_action(tracking_id: PathId) -> dict[str, Any]:
    """The action with its delivery (outbox message) and verification state (`kickoff actions show`)."""
    return _jsonable(action_state(tracking_id))


@router.post("/{tracking_id}/result", status_code=202, responses=error_responses(409))
def report(tracking_id: PathId, body: ActionResultBody) -> JSONResponse:
    """Report the consumer's result into execution_log (`kickoff actions result`); verified later.

    202 ``reported``; a repeat before verification (or after the verification set it aside) replaces it;
    409 once settled (verified or failed); 404 unknown.
    """
    out = report_result(tracking_id, outcome=body.outcome, details=body.details, reported_by=body.reported_by)
    return JSONResponse(out, status_code=202)

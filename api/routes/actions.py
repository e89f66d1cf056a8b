"""GET /v1/actions/{tracking_id} and POST .../result: an action's state and the consumer's result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.schemas import ActionResultBody
from config.errors import TriggerValidationError
from models.activity import ActionStatus
from publisher.actions import get_action, record_result

router = APIRouter(prefix="/v1/actions", tags=["actions"])


def action_dict(tracking_id: str) -> dict[str, Any]:
    """The action as `kickoff trigger show --json` prints it (times as ISO 8601)."""
    view = get_action(tracking_id)
    return {k: (val.isoformat() if hasattr(val, "isoformat") else val) for k, val in vars(view).items()}


@router.get("/{tracking_id}")
def show_action(tracking_id: str) -> dict[str, Any]:
    """Delivery and verification state of an action (404 if unknown)."""
    return action_dict(tracking_id)


@router.post("/{tracking_id}/result")
def report_result(tracking_id: str, body: ActionResultBody) -> dict[str, Any]:
    """Record the consumer's result (as `kickoff trigger result`); releases or cancels chained claims."""
    try:
        status = ActionStatus(body.status)
    except ValueError as exc:
        allowed = ", ".join(s.value for s in ActionStatus)
        raise TriggerValidationError("status", f"must be one of {allowed}") from exc
    record_result(tracking_id, status, error=body.error)
    return action_dict(tracking_id)

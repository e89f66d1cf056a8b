"""POST /v1/trigger/*: lineup, waiver, draft-pick and rumor-action through the library triggers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.headers import ctx_of, run_id, traceparent
from api.schemas import DraftPickBody, LineupBody, RumorBody, WaiverBody
from publisher.rumor import RumorRequest, evaluate_rumors, signals_from_json
from publisher.triggers import (
    DraftPickRequest,
    LineupRequest,
    TriggerResult,
    WaiverRequest,
    trigger_draft_pick,
    trigger_lineup,
    trigger_waiver,
)

router = APIRouter(prefix="/v1/trigger", tags=["triggers"])

DUPLICATE = "duplicate"


def answer(result: TriggerResult) -> JSONResponse:
    """202 for a new action (queued or pending), 200 for a duplicate with the original tracking id."""
    body = result.as_json()
    return JSONResponse(body, status_code=200 if body["status"] == DUPLICATE else 202)


def _send(request: Request, send: Any, trigger_request: Any) -> JSONResponse:
    ctx = ctx_of(request)
    result = send(trigger_request, publisher=ctx.publisher(), settings=ctx.settings, run_id=run_id(request))
    return answer(result)


def _swaps(body: LineupBody) -> list[dict[str, Any]]:
    return [s.model_dump(exclude_none=True) for s in body.swaps]


@router.post("/lineup", status_code=202)
def lineup(body: LineupBody, request: Request) -> JSONResponse:
    """Queue a lineup change (lineup_updates)."""
    trigger_request = LineupRequest(
        league_id=body.league_id,
        team=body.team_id,
        swaps=_swaps(body),
        idempotency_key=body.idempotency_key,
        decision_inputs=body.decision_inputs,
        traceparent=traceparent(request, body.traceparent),
    )
    return _send(request, trigger_lineup, trigger_request)


@router.post("/waiver", status_code=202)
def waiver(body: WaiverBody, request: Request) -> JSONResponse:
    """Queue a waiver claim (waiver_actions), optionally chained behind an IR move."""
    trigger_request = WaiverRequest(
        league_id=body.league_id,
        team=body.team_id,
        add_player_id=body.add_player_id,
        drop_player_id=body.drop_player_id,
        bid=body.bid,
        after_tracking_id=body.after_tracking_id,
        idempotency_key=body.idempotency_key,
        decision_inputs=body.decision_inputs,
        traceparent=traceparent(request, body.traceparent),
    )
    return _send(request, trigger_waiver, trigger_request)


@router.post("/draft-pick", status_code=202)
def draft_pick(body: DraftPickBody, request: Request) -> JSONResponse:
    """Queue a draft target (draft_targets); 409 for a filled or expired pick, 503 if not delivered."""
    trigger_request = DraftPickRequest(
        league_id=body.league_id,
        team=body.team_id,
        pick_number=body.pick_number,
        espn_id=body.espn_id,
        expires_at=body.expires_at,
        idempotency_key=body.idempotency_key,
        decision_inputs=body.decision_inputs,
        traceparent=traceparent(request, body.traceparent),
    )
    return _send(request, trigger_draft_pick, trigger_request)


def _roster_id(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return value  # the library refuses it, naming the field


@router.post("/rumor-action", status_code=202)
def rumor_action(body: RumorBody, request: Request) -> JSONResponse:
    """Weigh rumor signals; one outcome per signal (the lineup and waiver triggers it sent)."""
    ctx = ctx_of(request)
    rumor = RumorRequest(
        league_id=body.league_id,
        team=body.team_id,
        season=body.season,
        week=body.week,
        roster={_roster_id(k): v for k, v in body.roster.items()},
        signals=signals_from_json(body.signals),
        traceparent=traceparent(request, body.traceparent),
    )
    outcomes = evaluate_rumors(
        rumor, publisher=ctx.publisher(), settings=ctx.settings, run_id=run_id(request)
    )
    data = [o.as_json() for o in outcomes]
    sent_new = any(r["status"] != DUPLICATE for o in data for r in o["results"])
    return JSONResponse({"outcomes": data}, status_code=202 if sent_new else 200)
